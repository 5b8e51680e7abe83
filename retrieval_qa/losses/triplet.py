"""Triplet loss with batch-hard mining (residual-embedding paper, section 3.2; Hermans et al.
2017): for each anchor question the hardest positive (the farthest paragraph with its label)
and the hardest negative (the nearest paragraph with another label) in the batch.

``L = mean_i [ d(q_i, p_pos(i)) - d(q_i, p_neg(i)) + m ]_+`` with
``p_pos(i) = argmax_{j: y_j = y_i} d(q_i, p_j)`` and ``p_neg(i) = argmin_{j: y_j != y_i}
d(q_i, p_j)``; ``d`` is the Euclidean distance ``||q - p||_2`` (``squared=True``: its square;
the paper writes ``||q - p||2``, which reads either way).
"""

from __future__ import annotations

import torch
from torch import nn


def pairwise_distances(a: torch.Tensor, b: torch.Tensor, *, squared: bool,
                       eps: float = 1e-12) -> torch.Tensor:
    """``[A, D] x [B, D] -> [A, B]`` Euclidean distances, with a gradient that stays finite
    at zero distance (the square root is taken of ``max(d^2, eps)``).

    Args:
        a: ``[A, D]`` embeddings (rows of the result).
        b: ``[B, D]`` embeddings (columns of the result).
        squared: return the squared distances (no square root).
        eps: the floor of ``d^2`` under the square root.
    """
    d2 = (a.pow(2).sum(1, keepdim=True) - 2 * a @ b.T + b.pow(2).sum(1)).clamp_min(0.0)
    return d2 if squared else d2.clamp_min(eps).sqrt()


def batch_hard_triplet_loss(anchors: torch.Tensor, candidates: torch.Tensor,
                            anchor_labels: torch.Tensor, candidate_labels: torch.Tensor, *,
                            margin: float, squared: bool,
                            reduction: str = "mean") -> torch.Tensor:
    """anchors ``[B, D]`` (questions), candidates ``[N, D]`` (paragraphs), integer labels
    (paragraph ids). Anchors with no positive or no negative among the candidates are left
    out of the mean (a batch where every anchor is one is an error: nothing to learn from).

    Args:
        anchors: ``[B, D]`` anchor embeddings (the questions).
        candidates: ``[N, D]`` candidate embeddings (the paragraphs).
        anchor_labels: ``[B]`` integer label of each anchor.
        candidate_labels: ``[N]`` integer label of each candidate; equal labels are positives.
        margin: ``m``, in the units of ``d``.
        squared: use squared Euclidean distances.
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` (the per-anchor losses of the valid
            anchors, ``[B_valid]``).

    Example:

        >>> import torch
        >>> q = torch.tensor([[0.0, 0.0], [1.0, 0.0]])
        >>> labels = torch.tensor([0, 1])
        >>> batch_hard_triplet_loss(q, q, labels, labels, margin=0.2, squared=False,
        ...                         reduction="none")
        tensor([0., 0.])
        >>> batch_hard_triplet_loss(q, q, labels, labels, margin=2.0, squared=True)
        tensor(1.)
    """
    if anchors.ndim != 2 or candidates.ndim != 2 or anchors.shape[1] != candidates.shape[1]:
        raise ValueError(f"anchors {tuple(anchors.shape)} and candidates "
                         f"{tuple(candidates.shape)} must be [B, D] and [N, D]")
    d = pairwise_distances(anchors, candidates, squared=squared)
    same = anchor_labels[:, None] == candidate_labels[None, :]
    has_pos, has_neg = same.any(1), (~same).any(1)
    valid = has_pos & has_neg
    if not bool(valid.any()):
        raise ValueError("batch-hard triplet loss: no anchor has both a positive and a "
                         "negative in the batch (batch of one paragraph id?)")
    hardest_pos = d.masked_fill(~same, float("-inf")).amax(1)
    hardest_neg = d.masked_fill(same, float("inf")).amin(1)
    losses = (hardest_pos - hardest_neg + margin).clamp_min(0.0)[valid]
    if reduction == "none":
        return losses
    return losses.mean() if reduction == "mean" else losses.sum()


def batch_hard_indices(anchors: torch.Tensor, candidates: torch.Tensor,
                       anchor_labels: torch.Tensor, candidate_labels: torch.Tensor, *,
                       squared: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The (hardest positive, hardest negative) candidate index of every anchor (-1 where
    there is none): what the loss picks, for inspection and tests.

    Args:
        anchors: ``[B, D]`` anchor embeddings (the questions).
        candidates: ``[N, D]`` candidate embeddings (the paragraphs).
        anchor_labels: ``[B]`` integer label of each anchor.
        candidate_labels: ``[N]`` integer label of each candidate; equal labels are positives.
        squared: use squared Euclidean distances.

    Returns:
        Two ``[B]`` long tensors: the hardest positive's and the hardest negative's index.
    """
    with torch.no_grad():
        d = pairwise_distances(anchors, candidates, squared=squared)
        same = anchor_labels[:, None] == candidate_labels[None, :]
        pos = d.masked_fill(~same, float("-inf")).argmax(1)
        neg = d.masked_fill(same, float("inf")).argmin(1)
        return (torch.where(same.any(1), pos, -1), torch.where((~same).any(1), neg, -1))


class BatchHardTripletLoss(nn.Module):
    """Module form of :func:`batch_hard_triplet_loss`: ``forward(anchors, candidates,
    anchor_labels, candidate_labels)``.

    Args:
        margin: ``m`` (conf/model/residual.yaml: 0.2, FaceNet's on unit vectors).
        squared: squared Euclidean distances instead of the distances.

    Mines its negatives in the batch (:attr:`in_batch_negatives`): which side anchors the
    triplets matters, and a batch of one label has none.

    ``forward`` takes anchors ``[B, D]``, candidates ``[N, D]`` and their integer labels
    ``[B]`` and ``[N]`` (paragraph ids) and returns the scalar mean over the anchors that have
    both a positive and a negative.

    Example:

        >>> import torch
        >>> loss = BatchHardTripletLoss(margin=0.2, squared=False)
        >>> questions, paragraphs = torch.randn(4, 8), torch.randn(4, 8)
        >>> labels = torch.tensor([0, 0, 1, 1])
        >>> value = loss(questions, paragraphs, labels, labels)
        >>> value.shape, bool(value >= 0)
        (torch.Size([]), True)
    """

    in_batch_negatives = True

    def __init__(self, *, margin: float, squared: bool) -> None:
        super().__init__()
        if margin < 0:
            raise ValueError(f"margin must be >= 0, got {margin}")
        self.margin = float(margin)
        self.squared = squared

    def forward(self, anchors, candidates, anchor_labels, candidate_labels) -> torch.Tensor:
        return batch_hard_triplet_loss(anchors, candidates, anchor_labels, candidate_labels,
                                       margin=self.margin, squared=self.squared)
