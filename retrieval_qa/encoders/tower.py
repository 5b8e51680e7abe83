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
    ``encode(...) -> (embeddings, penalty)`` also returns the pooler's regulariser of the
    batch (a 0 tensor when it has none).
    """

    def __init__(
        self,
        token_encoder: TokenEncoder,
        pooler: Pooler,
        projection: nn.Module | None = None,
        normalize: bool = False,
    ) -> None:
        super().__init__()
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
