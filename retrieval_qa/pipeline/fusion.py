"""Fusion of per-question candidate lists: reciprocal-rank fusion and a convex combination of
normalised scores, on plain arrays (one list per retriever: candidate indices and scores).

* ranks inside a list follow the protocol: descending score, tied scores share the average
  rank (1-based);
* RRF: ``score(c) = sum_r 1 / (k + rank_r(c))`` over the lists that hold ``c``;
* convex: ``score(c) = sum_r w_r * norm_r(c)``, each list normalised on its own (per
  question): ``minmax`` ``(s - min) / (max - min)`` (a list whose scores are all equal: 1),
  ``zscore`` ``(s - mean) / std`` (std 0: 0); a candidate missing from list ``r`` takes that
  list's lowest normalised value (minmax: 0);
* a candidate no list holds gets no fused score: the ranking puts every such candidate below
  all fused ones, tied (:mod:`.ranking`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from scipy.stats import rankdata

# one retriever's list for one question: (candidate indices [n] int, scores [n] float)
RankedList = tuple[np.ndarray, np.ndarray]


def average_ranks(scores: np.ndarray) -> np.ndarray:
    """1-based ranks by descending score, ties sharing the average rank.

    Args:
        scores: ``[n]`` a list's scores.
    """
    return rankdata(-np.asarray(scores, dtype=np.float64), method="average")


def normalise(scores: np.ndarray, method: str) -> np.ndarray:
    """A list's scores normalised (module docstring): ``minmax`` (all equal: 1) or
    ``zscore`` (std 0: 0).

    Args:
        scores: ``[n]`` a list's scores.
        method: ``minmax`` or ``zscore``.
    """
    s = np.asarray(scores, dtype=np.float64)
    if len(s) == 0:
        return s
    if method == "minmax":
        lo, hi = s.min(), s.max()
        return np.ones_like(s) if hi == lo else (s - lo) / (hi - lo)
    if method == "zscore":
        std = s.std()
        return np.zeros_like(s) if std == 0 else (s - s.mean()) / std
    raise ValueError(f"normalization {method!r}; expected minmax or zscore")


def union(lists: Sequence[RankedList]) -> np.ndarray:
    """The sorted candidate indices that any list holds.

    Args:
        lists: one question's lists ``(candidate indices, scores)``.
    """
    parts = [np.asarray(ids, dtype=np.int64) for ids, _ in lists]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)


def feature_matrix(lists: Sequence[RankedList], kind: str, normalization: str = "minmax",
                   rrf_k: float = 60.0) -> tuple[np.ndarray, np.ndarray]:
    """(candidates [u], per-list contributions [u, R]) over the union of the lists; a fused
    score is the matrix times the weights.

    Args:
        lists: one question's lists ``(candidate indices, scores)``, one per retriever.
        kind: ``rrf``: ``1 / (rrf_k + rank)`` (0 when missing); ``convex``: the normalised
            score (the list's minimum when missing).
        normalization: ``minmax`` or ``zscore`` (``convex``).
        rrf_k: the RRF constant (``rrf``).
    """
    cands = union(lists)
    out = np.zeros((len(cands), len(lists)), dtype=np.float64)
    for r, (ids, scores) in enumerate(lists):
        ids = np.asarray(ids, dtype=np.int64)
        if len(np.unique(ids)) != len(ids):
            raise ValueError("a list names a candidate twice")
        if kind == "rrf":
            values, missing = 1.0 / (rrf_k + average_ranks(scores)), 0.0
        elif kind == "convex":
            values = normalise(scores, normalization)
            missing = values.min() if len(values) else 0.0
        else:
            raise ValueError(f"fusion {kind!r}; expected rrf or convex")
        out[:, r] = missing
        out[np.searchsorted(cands, ids), r] = values
    return cands, out


def rrf(lists: Sequence[RankedList], k: float = 60.0) -> RankedList:
    """Reciprocal-rank fusion of one question's lists: (candidates, fused scores).

    Args:
        lists: one question's lists ``(candidate indices, scores)``, one per retriever.
        k: the RRF constant.
    """
    cands, m = feature_matrix(lists, "rrf", rrf_k=k)
    return cands, m.sum(axis=1)


def convex(lists: Sequence[RankedList], weights: Sequence[float],
           normalization: str = "minmax") -> RankedList:
    """Convex combination of one question's normalised lists: (candidates, fused scores).

    Args:
        lists: one question's lists ``(candidate indices, scores)``, one per retriever.
        weights: one per list.
        normalization: ``minmax`` or ``zscore``.
    """
    if len(weights) != len(lists):
        raise ValueError(f"{len(weights)} weights for {len(lists)} lists")
    cands, m = feature_matrix(lists, "convex", normalization)
    return cands, m @ np.asarray(weights, dtype=np.float64)


def simplex_grid(n: int, step: float) -> np.ndarray:
    """[G, n]: every weight vector of non-negative multiples of ``step`` summing to 1.

    Args:
        n: the weights per vector.
        step: the grid's step (``1 / step`` a whole number).
    """
    units = round(1 / step)
    rows = [c for c in itertools.product(range(units + 1), repeat=n) if sum(c) == units]
    return np.asarray(rows, dtype=np.float64) / units
