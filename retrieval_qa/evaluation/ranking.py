"""The ReQA rank rules on score tensors.

* candidates are ranked by descending score; tied scores share the average rank
  (``scipy.stats.rankdata(-scores)``, 1-based);
* a question's rank is the minimum over its gold candidates, i.e. the rank of its best-scored
  gold candidate: ``#(score > g) + (#(score == g) + 1) / 2`` with ``g`` the best gold score;
* repeated question strings keep the minimum rank (``aggregate_min``).
"""

from __future__ import annotations

import torch


def gold_ranks(scores: torch.Tensor, gold_mask: torch.Tensor) -> torch.Tensor:
    """Average-tie rank of the best gold candidate per row.

    Args:
        scores: ``[Q, C]`` float.
        gold_mask: ``[Q, C]`` bool with at least one True per row.

    Returns:
        ``[Q]`` float64 ranks (1-based; x.5 for ties).

    Example:

        >>> import torch
        >>> scores = torch.tensor([[0.9, 0.5, 0.5], [0.1, 0.7, 0.7]])
        >>> gold = torch.tensor([[False, True, False], [False, False, True]])
        >>> gold_ranks(scores, gold)  # tied with one other candidate: rank 2.5, 1.5
        tensor([2.5000, 1.5000], dtype=torch.float64)
    """
    if scores.shape != gold_mask.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and gold mask {tuple(gold_mask.shape)} differ")
    if not bool(gold_mask.any(dim=1).all()):
        raise ValueError("every question needs at least one gold candidate")
    best = scores.masked_fill(~gold_mask, float("-inf")).max(dim=1, keepdim=True).values
    return rank_of_score(scores, best)


def rank_of_score(scores: torch.Tensor, threshold: torch.Tensor) -> torch.Tensor:
    """Average-tie rank that a score ``threshold[i]`` (shape [Q, 1]) takes in row i.

    Args:
        scores: ``[Q, C]`` the scores of each row.
        threshold: ``[Q, 1]`` the score to rank in each row.
    """
    greater = (scores > threshold).sum(dim=1, dtype=torch.float64)
    equal = (scores == threshold).sum(dim=1, dtype=torch.float64)
    return greater + (equal + 1.0) / 2.0


def aggregate_min(ranks: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Minimum rank per key (keys: [N] long, any values); one rank per distinct key, ordered
    by key.

    Args:
        ranks: ``[N]`` ranks, one per evaluation input.
        keys: ``[N]`` long, the question of each input (repeated questions share a key).

    Example:

        >>> import torch
        >>> aggregate_min(torch.tensor([3.0, 1.0, 2.0]), torch.tensor([7, 7, 2]))
        tensor([2., 1.])
    """
    unique, inverse = torch.unique(keys, return_inverse=True)
    out = torch.full((len(unique),), float("inf"), dtype=ranks.dtype, device=ranks.device)
    return out.scatter_reduce(0, inverse, ranks, reduce="amin")
