"""Listwise softmax cross-entropy over groups of scored candidates (a reranker's loss).

A batch holds several groups, each one question's candidates: its gold pair and its
negatives, of any sizes. For group ``g`` with logits ``s_i`` and gold ``p``:

    loss_g = -s_p + log sum_{i in g} exp(s_i)

the cross-entropy of the softmax over the group (the candidates compete, as in ranking),
averaged over the groups. Computed in float32.
"""

from __future__ import annotations

import torch


def grouped_softmax_loss(logits: torch.Tensor, group: torch.Tensor,
                         labels: torch.Tensor) -> torch.Tensor:
    """``logits`` [N], ``group`` [N] (group index of each row, 0..G-1), ``labels`` [N] (1 for
    the one gold row of each group, else 0). Returns the mean of the groups' losses.

    Args:
        logits: ``[N]`` scores of the candidates, all groups' rows together.
        group: ``[N]`` long, the group (question) of each row, ``0..G-1``; groups may have
            any sizes.
        labels: ``[N]``, 1 for the one gold row of each group, else 0.

    Returns:
        The scalar mean over the groups of ``-s_gold + logsumexp(s_group)`` (float32).

    Raises:
        ValueError: shapes that differ; an empty batch (``N = 0``: no group, so no mean to
            take; a zero would train on nothing without a word, and the mean of nothing is
            NaN), which is a bug upstream (the reranker's batches hold whole groups, each
            with its gold row); a group without exactly one gold row.

    Example:

        >>> import torch
        >>> logits = torch.tensor([0.0, 0.0, 5.0, 1.0, 1.0])
        >>> group = torch.tensor([0, 0, 1, 1, 1])
        >>> labels = torch.tensor([1, 0, 1, 0, 0])
        >>> loss = grouped_softmax_loss(logits, group, labels)
        >>> loss.shape, bool(loss > 0)
        (torch.Size([]), True)
    """
    if not logits.shape == group.shape == labels.shape:
        raise ValueError(f"logits {tuple(logits.shape)}, group {tuple(group.shape)} and labels "
                         f"{tuple(labels.shape)} must have one shape [N]")
    if not len(logits):
        raise ValueError(f"grouped_softmax_loss: logits of shape {tuple(logits.shape)}: no "
                         "rows, so no group and no loss (an empty batch is a bug upstream: "
                         "the batch's lists lost every row before the loss)")
    if int(group.min()) < 0:
        raise ValueError(f"group holds {int(group.min())}: groups are numbered 0..G-1")
    if not bool(((labels == 0) | (labels == 1)).all()):
        raise ValueError("labels must be 0 or 1 (1: the gold row of its group)")
    logits = logits.float()
    n = int(group.max()) + 1
    gold_count = torch.zeros(n, device=logits.device).index_add_(0, group, labels.float())
    if not bool((gold_count == 1).all()):
        raise ValueError("every group needs exactly one gold row (label 1)")
    peak = torch.full((n,), float("-inf"), device=logits.device).scatter_reduce(
        0, group, logits.detach(), "amax")
    shifted = logits - peak[group]  # <= 0: no overflow, and no cancellation below
    sums = torch.zeros(n, device=logits.device).index_add_(0, group, torch.exp(shifted))
    gold = torch.zeros(n, device=logits.device).index_add_(0, group, shifted * labels.float())
    return (torch.log(sums) - gold).mean()
