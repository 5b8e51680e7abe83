"""Quadratic regression conditional loss (residual-embedding paper, section 3.2, eq. 1):

``m'(m, d) = m if d > m else 0``;  ``L = [d - m]_+ + m'(m, d)``, ``d = ||q - p||`` for each
(question, its paragraph) pair, averaged over the batch. Written out, ``L = d`` when
``d > m`` and ``0`` otherwise: pairs already within the margin cost nothing, the others pay
their whole distance (the loss jumps by ``m`` at ``d = m``). ``squared=True`` takes
``d = ||q - p||^2`` (the paper's ``||q - p||2`` reads either way). Only positive pairs enter:
the paper reports it below the triplet loss.
"""

from __future__ import annotations

import torch
from torch import nn


def conditional_margin(margin: float, d: torch.Tensor) -> torch.Tensor:
    """eq. 1: ``m`` where ``d > m``, else 0.

    Args:
        margin: ``m``, in the units of ``d``.
        d: the pairs' distances, any shape (``[B]`` in the loss).
    """
    return torch.where(d > margin, torch.full_like(d, margin), torch.zeros_like(d))


def quadratic_conditional_loss(q: torch.Tensor, p: torch.Tensor, *, margin: float,
                               squared: bool, reduction: str = "mean") -> torch.Tensor:
    """Eq. 1 over the batch's (question, its paragraph) pairs (see the module docstring).

    Args:
        q: ``[B, D]`` question embeddings.
        p: ``[B, D]`` embeddings of each question's paragraph (row ``i`` is pair ``i``).
        margin: ``m``, in the units of ``d``.
        squared: ``d = ||q - p||^2`` instead of ``||q - p||``.
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` (the ``[B]`` per-pair losses).

    Example:

        >>> import torch
        >>> q = torch.zeros(2, 2)
        >>> p = torch.tensor([[0.0, 0.1], [0.0, 3.0]])  # d = 0.1 (within m), d = 3 (beyond)
        >>> quadratic_conditional_loss(q, p, margin=1.0, squared=True, reduction="none")
        tensor([0., 9.])
    """
    if q.shape != p.shape or q.ndim != 2:
        raise ValueError(f"q {tuple(q.shape)} and p {tuple(p.shape)} must both be [B, D]")
    diff = q - p
    d2 = diff.pow(2).sum(1)
    d = d2 if squared else d2.clamp_min(1e-12).sqrt()
    losses = (d - margin).clamp_min(0.0) + conditional_margin(margin, d)
    if reduction == "none":
        return losses
    return losses.mean() if reduction == "mean" else losses.sum()


class QuadraticConditionalLoss(nn.Module):
    """Module form of :func:`quadratic_conditional_loss`: ``forward(q, p)`` of the batch's
    (question, its paragraph) pairs.

    Args:
        margin: ``m`` of eq. 1.
        squared: ``d = ||q - p||^2`` instead of ``||q - p||``.

    Positive pairs only (:attr:`in_batch_negatives` False): no anchor side, no negative.

    ``forward(q[B, D], p[B, D])`` returns the scalar batch mean.

    Example:

        >>> import torch
        >>> loss = QuadraticConditionalLoss(margin=0.2, squared=False)
        >>> loss(torch.zeros(3, 4), torch.zeros(3, 4))  # every pair within the margin
        tensor(0.)
    """

    in_batch_negatives = False

    def __init__(self, *, margin: float, squared: bool) -> None:
        super().__init__()
        self.margin = float(margin)
        self.squared = squared

    def forward(self, q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return quadratic_conditional_loss(q, p, margin=self.margin, squared=self.squared)
