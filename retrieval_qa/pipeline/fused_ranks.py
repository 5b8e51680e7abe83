"""Ranking fused lists with the one evaluator (:func:`~retrieval_qa.evaluation.evaluator.
rank_questions`, its sparse path), so ties, gold copies, one-to-many gold and document ranks
follow the same code as every other evaluation.

The rank rule beyond the lists: every candidate that no stage retrieved for a question ties
below all the retrieved ones, sharing the average rank of the remaining positions: with ``n``
retrieved and ``C`` candidates, a gold candidate that none retrieved ranks
``n + (C - n + 1) / 2``. That is what the full-ranking evaluator gives when every unretrieved
candidate scores ``-inf``; with lists that hold every candidate (``top_k`` = pool size) the
pipeline's ranks are the full ranking's. A retriever's top-k cut breaks score ties by
candidate index (the evaluator's top-k order), so candidates tied at the k-th score may fall
on either side of the cut: below the pool size the lists, not the full ranking, decide.

Each question's fused scores reach the evaluator as integer levels (the distinct scores in
descending order: the highest gets the most, ties keep one level; unretrieved: 0), so the
evaluator's float32 cannot merge two distinct float64 scores or split a tie. A list may also
carry a tier per candidate (the reranked head above the rest): the order is by tier, then
score.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..data.types import RetrievalPool
from ..evaluation.evaluator import doc_index, rank_questions
from ..evaluation.sparse import SparseScores


def levels(scores: np.ndarray, tiers: np.ndarray | None = None) -> np.ndarray:
    """[n] float: 1 for the lowest (tier, score), one more for each higher distinct pair.

    Args:
        scores: ``[n]`` a list's scores.
        tiers: ``[n]`` their tiers (a higher tier above any score); None: one tier.
    """
    scores = np.asarray(scores, dtype=np.float64)
    tiers = np.zeros(len(scores)) if tiers is None else np.asarray(tiers, dtype=np.float64)
    order = np.lexsort((scores, tiers))  # ascending
    s, t = scores[order], tiers[order]
    step = np.concatenate([[1.0], ((s[1:] != s[:-1]) | (t[1:] != t[:-1])).astype(float)])
    out = np.empty(len(scores))
    out[order] = np.cumsum(step) if len(scores) else step[:0]
    return out


def ordered(ids: np.ndarray, scores: np.ndarray, tiers: np.ndarray | None = None) -> np.ndarray:
    """Positions of a list in ranking order: tier, then score descending, then ascending
    candidate index (the evaluator's top-k order).

    Args:
        ids: ``[n]`` the list's candidate indices.
        scores: ``[n]`` their scores.
        tiers: ``[n]`` their tiers; None: one tier.
    """
    tiers = np.zeros(len(ids)) if tiers is None else tiers
    return np.lexsort((ids, -np.asarray(scores, dtype=np.float64), -np.asarray(tiers)))


class FusedScorer:
    """The evaluator's scorer for per-question lists (``lists[q]``: candidate indices, scores,
    optional tiers): listed candidates at their levels, every other candidate at 0.

    Args:
        lists: per question ``(candidate indices, scores[, tiers])``.
        num_candidates: how many candidates the pool has.
    """

    def __init__(self, lists: Sequence[tuple], num_candidates: int) -> None:
        self.lists = lists
        self.num_questions = len(lists)
        self.num_candidates = num_candidates

    def score_sparse(self, rows: range) -> SparseScores:
        parts = [self.lists[q] for q in rows]
        indptr = np.concatenate([[0], np.cumsum([len(p[0]) for p in parts])]).astype(np.int64)
        cols = np.concatenate([np.asarray(p[0], dtype=np.int64) for p in parts]) \
            if parts else np.zeros(0, dtype=np.int64)
        values = np.concatenate([levels(p[1], p[2] if len(p) > 2 else None) for p in parts]) \
            if parts else np.zeros(0)
        return SparseScores(indptr, cols, values.astype(np.float32),
                            np.zeros(len(parts), dtype=np.float32), self.num_candidates)


def rank_lists(pool: RetrievalPool, lists: Sequence[tuple], *, doc_level: bool,
               memory_mb: float) -> tuple[np.ndarray, np.ndarray | None]:
    """([Q] gold ranks, [Q] doc ranks or None) of per-question lists under the rule above.

    Args:
        pool: the pool whose candidates the lists index.
        lists: per question ``(candidate indices, scores[, tiers])``.
        doc_level: also the gold documents' ranks.
        memory_mb: the evaluator's memory budget, in MiB.
    """
    if len(lists) != len(pool.questions):
        raise ValueError(f"{len(lists)} lists for {len(pool.questions)} questions")
    doc_of = doc_index(pool)[0] if doc_level else None
    ranks, doc_ranks = rank_questions(FusedScorer(lists, len(pool.candidates)), pool.gold,
                                      doc_of, memory_mb=memory_mb, sparse=True)
    return ranks.numpy(), None if doc_ranks is None else doc_ranks.numpy()
