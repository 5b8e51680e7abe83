"""Retrieval metrics from per-question ranks (the protocol's ranks; floats for ties).

All metrics are percentages over the number of questions (the denominator is the number of
distinct evaluation questions, never the number of QA inputs):

* ``mrr``: mean of 1/rank; ``mrr@100``: the same with 1/rank counted as 0 past rank 100;
* ``r@k``: share of questions with rank <= k;
* ``p@k``: as reported by the MultiReQA and supervised-mining papers, "precision at N" is the
  share of questions with a correct answer in the top N, i.e. the same number as ``r@k``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def metrics_from_ranks(ranks: torch.Tensor | Sequence[float], ks: Sequence[int],
                       prefix: str = "") -> dict[str, float]:
    """MRR, MRR@100 and R@k / P@k at the cut-offs ``ks`` (the ``eval`` group's ``ks``).

    Args:
        ranks: the questions' ranks (1-based; floats for ties).
        ks: the cut-offs of R@k / P@k.
        prefix: put before every key (``"doc_"`` for document ranks).

    Returns:
        ``{"mrr", "mrr@100", "r@k", "p@k" for k in ks}`` in percent.

    Example:

        >>> metrics_from_ranks([1, 2, 4, 128], ks=(1, 10))
        {'mrr': 43.9453125, 'mrr@100': 43.75, 'r@1': 25.0, 'p@1': 25.0, 'r@10': 75.0, 'p@10': 75.0}
    """
    ranks = torch.as_tensor(ranks, dtype=torch.float64)
    if ranks.numel() == 0:
        raise ValueError("no ranks to compute metrics from")
    if bool((ranks < 1).any()):
        raise ValueError("ranks are 1-based; got a rank below 1")
    rr = 1.0 / ranks
    out = {f"{prefix}mrr": 100 * rr.mean().item(),
           f"{prefix}mrr@100": 100 * torch.where(ranks <= 100, rr, 0.0).mean().item()}
    for k in ks:
        hit = 100 * (ranks <= k).double().mean().item()
        out[f"{prefix}r@{k}"] = hit
        out[f"{prefix}p@{k}"] = hit
    return out
