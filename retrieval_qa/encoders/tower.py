"""One side of a dual encoder: token encoder, pooler, optional projection."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .poolers import Pooler
from .token_encoder import TokenEncoder


class Tower(nn.Module):
    """``forward(input_ids[B, L], attention_mask[B, L], token_type_ids[B, L] | None = None)
    -> embeddings[B, output_dim]``.

    Args:
        token_encoder: ids to states ``[B, L, H]``.
        pooler: states to ``[B, D]``.
        projection: an optional module ``[B, D] -> [B, D']`` (shared between towers in
            ADE-SPL); None: none.
        normalize: L2-normalise the final embedding (cosine retrieval; off for the
            inner-product kernel of ENDX).
        chunk_rows: encode a batch of more rows in length-sorted chunks of this many rows,
            each cut to its own longest text, so short texts are not padded to the batch's
            longest (``encoder.chunk_rows``; None: the whole batch at once). Every chunk is a
            batch of its own, so the embeddings are the same (to float rounding) and the
            pooler's penalty, a mean over rows, is the row-weighted mean of the chunks'.
            Saves the padding's compute where it dominates (a CPU, mixed lengths); on a GPU a
            whole batch is usually faster.
        input_types: an ``nn.Embedding(2, E)`` of input-type vectors (E: the token
            embeddings' width, ``token_encoder.input_dim``); None: none. That vector is added
            to every input token's embedding (the supervised-mining paper's input-type
            embedding, 4.2), so one shared encoder knows which side it encodes.
            ``for_side(i)`` gives the other side's tower over the same modules.
        input_type: the row of ``input_types`` of this tower's side (0 question, 1 answer).

    ``encode(...) -> (embeddings, penalty)`` also returns the pooler's regulariser of the
    batch (a 0 tensor when it has none).

    Example:

        >>> import torch
        >>> from retrieval_qa.encoders import MeanPooler, RecurrentTokenEncoder, TokenEmbedder
        >>> encoder = RecurrentTokenEncoder(TokenEmbedder(100, 16, padding_idx=0), kind="gru",
        ...                                 hidden_size=8, num_layers=1, bidirectional=True,
        ...                                 dropout=0.0)
        >>> tower = Tower(encoder, MeanPooler(8), normalize=True, chunk_rows=None)
        >>> emb = tower(torch.randint(1, 100, (3, 5)), torch.ones(3, 5))
        >>> emb.shape, bool(torch.allclose(emb.norm(dim=1), torch.ones(3)))
        (torch.Size([3, 8]), True)
    """

    def __init__(
        self,
        token_encoder: TokenEncoder,
        pooler: Pooler,
        projection: nn.Module | None = None,
        *,
        normalize: bool,
        chunk_rows: int | None,
        input_types: nn.Embedding | None = None,
        input_type: int = 0,
    ) -> None:
        super().__init__()
        if input_types is not None and not 0 <= input_type < input_types.num_embeddings:
            raise ValueError(f"input_type={input_type}; the table has "
                             f"{input_types.num_embeddings} rows")
        self.input_types = input_types
        self.input_type = input_type
        if chunk_rows is not None and chunk_rows < 1:
            raise ValueError(f"encoder.chunk_rows={chunk_rows}; expected a positive number of "
                             "rows or null (the whole batch at once)")
        self.chunk_rows = chunk_rows
        self.token_encoder = token_encoder
        self.pooler = pooler
        self.projection = projection
        self.normalize = normalize

    @property
    def output_dim(self) -> int:
        if self.projection is not None:
            dim = getattr(self.projection, "output_dim", None)
            return int(dim if dim is not None else self.projection.out_features)
        return int(self.pooler.output_dim)

    @property
    def token_embedder(self) -> nn.Module:
        return self.token_encoder.token_embedder

    def for_side(self, input_type: int) -> Tower:
        """A tower over this one's modules (shared, not copied) that marks its inputs as
        ``input_type``; needs ``input_types``."""
        if self.input_types is None:
            raise ValueError("for_side needs a tower with input_types")
        return Tower(self.token_encoder, self.pooler, self.projection, normalize=self.normalize,
                     chunk_rows=self.chunk_rows, input_types=self.input_types,
                     input_type=input_type)

    def shares_modules_with(self, other: Tower) -> bool:
        """Whether ``other`` is this tower or one over the same modules (``for_side``)."""
        return other is self or all(
            getattr(other, name) is getattr(self, name)
            for name in ("token_encoder", "pooler", "projection", "input_types"))

    def encode(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        rows = self.chunk_rows
        if rows is None or input_ids.shape[0] <= rows:
            return self._encode(input_ids, attention_mask, token_type_ids)
        order = attention_mask.sum(1).argsort(stable=True)
        vectors, penalty = [], 0.0
        for idx in order.split(rows):
            mask = attention_mask[idx]
            keep = mask.bool().any(0)          # the chunk's columns holding any real token
            types = None if token_type_ids is None else token_type_ids[idx][:, keep]
            v, p = self._encode(input_ids[idx][:, keep], mask[:, keep], types)
            vectors.append(v)
            penalty = penalty + p * len(idx)
        out = torch.cat(vectors).index_select(0, order.argsort())
        return out, penalty / input_ids.shape[0]

    def _encode(self, input_ids, attention_mask, token_type_ids):
        if self.input_types is None:
            states = self.token_encoder(input_ids, attention_mask, token_type_ids)
        else:
            offset = self.input_types.weight[self.input_type]
            states = self.token_encoder(input_ids, attention_mask, token_type_ids,
                                        input_offset=offset)
        pooled, penalty = self.pooler.pool(states, attention_mask)
        if self.projection is not None:
            pooled = self.projection(pooled)
        if self.normalize:
            pooled = F.normalize(pooled, dim=-1)
        return pooled, penalty

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return self.encode(input_ids, attention_mask, token_type_ids)[0]
