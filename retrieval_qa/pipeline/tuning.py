"""Tuning fusion on the validation side of the training file (the 9:1 split of
:func:`~retrieval_qa.data.split.train_val_split` and the ``max_val_questions`` cap, as the
data module makes them), never on a
test pool: convex weights over a simplex grid, or the RRF constant over a list, chosen by MRR
under the pipeline's rank rule (:mod:`.ranking`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..data.subsets import question_subset  # noqa: F401 (imported from here by the pipeline)
from .fusion import feature_matrix, simplex_grid


def grid_mrr(per_question: Sequence[Sequence[tuple]], gold: Sequence[Sequence[int]],
             num_candidates: int, kind: str, settings: Sequence, normalization: str = "minmax"
             ) -> np.ndarray:
    """MRR (%) of every setting. Ranks as :mod:`.ranking` gives them: average ties
    among the fused candidates, every unfused candidate tied below them.

    Args:
        per_question: per question, its lists ``(candidate indices, scores)``, one per retriever.
        gold: per question, its gold candidate indices.
        num_candidates: how many candidates the pool has.
        kind: ``convex`` or ``rrf``.
        settings: ``convex``: ``[G, R]`` weight vectors; ``rrf``: RRF constants (equal weights).
        normalization: ``minmax`` or ``zscore`` (``convex``).
    """
    total = np.zeros(len(settings))
    for lists, g in zip(per_question, gold, strict=True):
        if kind == "convex":
            cands, m = feature_matrix(lists, "convex", normalization)
            fused = m @ np.asarray(settings, dtype=np.float64).T  # [u, G]
        else:
            fused = np.stack([feature_matrix(lists, "rrf", rrf_k=k)[1].sum(axis=1)
                              for k in settings], axis=1)
            cands = feature_matrix(lists, "rrf", rrf_k=settings[0])[0]
        is_gold = np.isin(cands, np.asarray(g))
        u = len(cands)
        if not is_gold.any():
            total += 1.0 / (u + (num_candidates - u + 1) / 2)
            continue
        best = fused[is_gold].max(axis=0)  # [G]
        greater = (fused > best).sum(axis=0)
        equal = (fused == best).sum(axis=0)
        total += 1.0 / (greater + (equal + 1) / 2)
    return 100 * total / max(len(gold), 1)


def tune(per_question, gold, num_candidates: int, kind: str, *, names: Sequence[str],
         grid_step: float = 0.1, rrf_k_grid: Sequence[float] = (60,),
         normalization: str = "minmax") -> dict:
    """The best setting on the validation lists and the MRR of every setting tried.

    Args:
        per_question: per question, its lists ``(candidate indices, scores)``, one per retriever.
        gold: per question, its gold candidate indices.
        num_candidates: how many candidates the pool has.
        kind: ``convex`` (weights on the simplex grid) or ``rrf`` (the constant).
        names: the retrievers, in the lists' order.
        grid_step: the step of the weight grid (``convex``).
        rrf_k_grid: the RRF constants to try (``rrf``).
        normalization: ``minmax`` or ``zscore`` (``convex``).
    """
    if kind == "convex":
        grid = simplex_grid(len(names), grid_step)
        mrr = grid_mrr(per_question, gold, num_candidates, kind, grid, normalization)
        best = int(np.argmax(mrr))
        return {"weights": {n: round(float(w), 6) for n, w in zip(names, grid[best],
                                                                  strict=True)},
                "val_mrr": round(float(mrr[best]), 4), "settings_tried": len(grid)}
    grid = list(rrf_k_grid)
    mrr = grid_mrr(per_question, gold, num_candidates, kind, grid)
    best = int(np.argmax(mrr))
    return {"rrf_k": grid[best], "val_mrr": round(float(mrr[best]), 4),
            "val_mrr_by_rrf_k": {str(k): round(float(v), 4) for k, v in zip(grid, mrr,
                                                                              strict=True)}}
