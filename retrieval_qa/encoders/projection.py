"""The projection layer on top of a pooled vector (shared between towers in ADE-SPL)."""

from __future__ import annotations

import math

import torch
from torch import nn


class Projection(nn.Module):
    """``forward(pooled[B, in_dim]) -> projected[B, output_dim]``: one linear map.

    Initialised as in the SDE/ADE paper ("variance scaling initialization with scale 1.0":
    truncated normal, std sqrt(1 / in_dim)); ``bias``: conf/ has none, like the T5
    projection of Sentence-T5 that the paper follows.

    Args:
        in_dim: the width of the pooled vectors.
        output_dim: the width of the projected ones.
        bias: add a bias (initialised to 0).

    Example:

        >>> import torch
        >>> Projection(16, 8, bias=False)(torch.randn(3, 16)).shape
        torch.Size([3, 8])
    """

    def __init__(self, in_dim: int, output_dim: int, *, bias: bool) -> None:
        super().__init__()
        self.output_dim = output_dim
        self.linear = nn.Linear(in_dim, output_dim, bias=bias)
        std = math.sqrt(1.0 / in_dim)
        nn.init.trunc_normal_(self.linear.weight, std=std, a=-2 * std, b=2 * std)
        if bias:
            nn.init.zeros_(self.linear.bias)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.linear(pooled)
