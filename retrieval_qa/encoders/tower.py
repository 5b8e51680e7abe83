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

    token_encoder: ids to states ``[B, L, H]``. pooler: states to ``[B, D]``.
    projection: an optional module ``[B, D] -> [B, D']`` (shared between towers in ADE-SPL).
    normalize: L2-normalise the final embedding (cosine retrieval; off for the inner-product
        kernel of ENDX).
    chunk_rows: encode a batch of more rows in length-sorted chunks of this many rows, each
        cut to its own longest text, so short texts are not padded to the batch's longest
        (``encoder.chunk_rows``; None: the whole batch at once). Every chunk is a batch of
        its own, so the embeddings are the same (to float rounding) and the pooler's penalty,
        a mean over rows, is the row-weighted mean of the chunks'. Saves the padding's compute
        where it dominates (a CPU, mixed lengths); on a GPU a whole batch is usually faster.
    ``encode(...) -> (embeddings, penalty)`` also returns the pooler's regulariser of the
    batch (a 0 tensor when it has none).
    """

    def __init__(
        self,
        token_encoder: TokenEncoder,
        pooler: Pooler,
        projection: nn.Module | None = None,
        normalize: bool = False,
        chunk_rows: int | None = None,
    ) -> None:
        super().__init__()
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
        states = self.token_encoder(input_ids, attention_mask, token_type_ids)
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
