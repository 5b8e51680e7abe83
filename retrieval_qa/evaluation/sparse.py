"""The ReQA rank rules on sparse score blocks, for scorers where most candidates of a question
share one score (BM25: every candidate with no query term scores the same).

A :class:`SparseScores` block holds, for a range of questions, the candidates whose score was
computed (CSR rows: each candidate at most once per question) and one ``base`` score per
question that every other candidate has. The functions here give the same numbers as the
dense rules of :mod:`.ranking` on the full rows those blocks stand for, without building the
rows:

* rank of the best gold: ``#(score > g) + (#(score == g) + 1) / 2``, counted over the listed
  entries plus the unlisted candidates (all at ``base``);
* document ranks: a paragraph scores the maximum of its sentences, listed or not; only the
  entries at or above the best gold score can decide it, so only those are grouped (all of a
  row's entries when its base is not below the gold score);
* top-k: descending score, ties broken by ascending candidate index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass
class SparseScores:
    """Scores of ``len(base)`` questions over ``num_candidates`` candidates, as CSR rows:
    row ``r`` lists candidates ``cols[indptr[r]:indptr[r + 1]]`` (each at most once, in any
    order) with scores ``values[...]``; every other candidate of row ``r`` scores ``base[r]``.

    Attributes:
        indptr: ``[rows + 1]`` the CSR row offsets into ``cols`` / ``values``.
        cols: the listed candidates' indices.
        values: their scores.
        base: ``[rows]`` the score of every unlisted candidate of each row.
        num_candidates: the candidates of each row, listed or not.
    """

    indptr: np.ndarray
    cols: np.ndarray
    values: np.ndarray
    base: np.ndarray
    num_candidates: int

    @classmethod
    def from_entries(cls, rows: np.ndarray, cols: np.ndarray, values: np.ndarray,
                     base: np.ndarray, num_candidates: int) -> SparseScores:
        order = np.argsort(rows, kind="stable")
        indptr = np.searchsorted(rows[order], np.arange(len(base) + 1))
        return cls(indptr, cols[order], values[order], base, num_candidates)

    @property
    def num_rows(self) -> int:
        return len(self.base)

    def row_of(self) -> np.ndarray:
        return np.repeat(np.arange(self.num_rows), np.diff(self.indptr))

    def dense(self) -> np.ndarray:
        """The full [rows, candidates] matrix (for tests and small pools)."""
        out = np.repeat(self.base[:, None], self.num_candidates, axis=1)
        out[self.row_of(), self.cols] = self.values
        return out

    def first_non_finite(self) -> tuple[int, int | None, float] | None:
        """(row, candidate or None for the unlisted ones, value) of a non-finite score."""
        bad = ~np.isfinite(self.base)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            return r, None, float(self.base[r])
        bad = ~np.isfinite(self.values)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return int(self.row_of()[i]), int(self.cols[i]), float(self.values[i])
        return None


def _per_row(indptr: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """How many True in each CSR row of ``mask``."""
    at = np.searchsorted(np.flatnonzero(mask), indptr)
    return np.diff(at).astype(np.float64)


def _average_rank(greater: np.ndarray, equal: np.ndarray) -> np.ndarray:
    return greater + (equal + 1.0) / 2.0


def _flatten(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    rows = np.repeat(np.arange(len(lists)), [len(x) for x in lists])
    cols = np.fromiter((c for x in lists for c in x), dtype=np.int64, count=len(rows))
    return rows, cols


def _lookup(block: SparseScores, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Score of candidate ``cols[j]`` in row ``rows[j]``, listed or not (a scan of each
    wanted row in scipy's compiled code)."""
    shape = (block.num_rows, block.num_candidates)
    listed = sp.csr_array((np.ones(len(block.cols), dtype=np.int8), block.cols, block.indptr),
                          shape=shape)
    values = sp.csr_array((block.values, block.cols, block.indptr), shape=shape)
    out = block.base[rows].copy()
    hit = np.asarray(listed[rows, cols]).ravel() > 0
    out[hit] = np.asarray(values[rows[hit], cols[hit]]).ravel()
    return out


def best_gold_scores(block: SparseScores, gold: list[list[int]]) -> np.ndarray:
    """[rows]: the best score among each row's gold candidates.

    Args:
        block: the block's scores.
        gold: each row's gold candidate indices (at least one).
    """
    if len(gold) != block.num_rows or any(not g for g in gold):
        raise ValueError("every question needs at least one gold candidate")
    g_rows, g_cols = _flatten(gold)
    scores = _lookup(block, g_rows, g_cols)
    best = np.full(block.num_rows, -np.inf, dtype=block.values.dtype)
    np.maximum.at(best, g_rows, scores)
    return best


def gold_ranks(block: SparseScores, best: np.ndarray, row_of: np.ndarray) -> np.ndarray:
    """[rows] float64: the average-tie rank of score ``best[r]`` in row ``r``.

    Args:
        block: the block's scores.
        best: ``[rows]`` the score to rank in each row (:func:`best_gold_scores`).
        row_of: the row of each listed entry (``block.row_of()``).
    """
    t = best[row_of]
    unlisted = block.num_candidates - np.diff(block.indptr).astype(np.float64)
    greater = _per_row(block.indptr, block.values > t) + np.where(block.base > best,
                                                                   unlisted, 0.0)
    equal = _per_row(block.indptr, block.values == t) + np.where(block.base == best,
                                                                  unlisted, 0.0)
    return _average_rank(greater, equal)


def doc_ranks(block: SparseScores, best: np.ndarray, row_of: np.ndarray, doc_of: np.ndarray,
              doc_sizes: np.ndarray, doc_gold: list[list[int]]) -> np.ndarray:
    """[rows] float64: average-tie rank of each row's best gold document, a document scoring
    the maximum of its candidates' scores (listed or at ``base``).

    Args:
        block: the block's scores.
        best: ``[rows]`` the rows' best gold candidate scores (a lower bound of the best gold
            document's score).
        row_of: the row of each listed entry (``block.row_of()``).
        doc_of: ``[C]`` each candidate's document.
        doc_sizes: ``[D]`` the candidates of each document.
        doc_gold: each row's gold documents.
    """
    n, n_d = block.num_rows, len(doc_sizes)
    # rows whose base is below the gold score: a document can only tie or beat the best gold
    # document through listed entries >= that score; other rows keep every entry
    full = block.base >= best
    keep = (block.values >= best[row_of]) | full[row_of]
    rows, docs, vals = row_of[keep], doc_of[block.cols[keep]], block.values[keep]
    keys = rows.astype(np.int64) * n_d + docs
    order = np.lexsort((vals, keys))  # by key, the largest value last in each key
    keys, vals = keys[order], vals[order]
    last = np.flatnonzero(np.append(keys[1:] != keys[:-1], len(keys) > 0))
    first = np.concatenate([[0], last[:-1] + 1]) if len(last) else last
    u_keys, u_max, u_count = keys[last], vals[last], last - first + 1
    u_rows, u_docs = np.divmod(u_keys, n_d)
    # a fully listed document has no candidate at base
    partly = full[u_rows] & (u_count < doc_sizes[u_docs])
    u_score = np.where(partly, np.maximum(u_max, block.base[u_rows]), u_max)
    g_rows, g_docs = _flatten(doc_gold)
    g_keys = g_rows.astype(np.int64) * n_d + g_docs
    at = np.minimum(np.searchsorted(u_keys, g_keys), max(len(u_keys) - 1, 0))
    hit = (u_keys[at] == g_keys) if len(u_keys) else np.zeros(len(g_keys), dtype=bool)
    # a gold document with no kept entry: fully unlisted (at base) in a full row, else below
    # the best gold sentence, which is listed and kept
    g_score = np.where(hit, u_score[at] if len(u_keys) else 0.0,
                       np.where(full[g_rows], block.base[g_rows], -np.inf))
    gd = np.full(n, -np.inf, dtype=np.float64)
    np.maximum.at(gd, g_rows, g_score.astype(np.float64))
    gd = gd.astype(block.values.dtype)
    u_ptr = np.searchsorted(u_rows, np.arange(n + 1))
    untouched = n_d - np.diff(u_ptr).astype(np.float64)
    greater = _per_row(u_ptr, u_score > gd[u_rows]) + np.where(full & (block.base > gd),
                                                                untouched, 0.0)
    equal = _per_row(u_ptr, u_score == gd[u_rows]) + np.where(full & (block.base == gd),
                                                               untouched, 0.0)
    return _average_rank(greater, equal)


def top_k(block: SparseScores, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per row: (candidate indices, scores) of the ``k`` best, by descending score then
    ascending candidate index.

    Args:
        block: the block's scores.
        k: how many per row (at most the candidates).
    """
    k = min(k, block.num_candidates)
    out = []
    for r in range(block.num_rows):
        lo, hi = block.indptr[r], block.indptr[r + 1]
        listed = block.cols[lo:hi]
        c, v = listed, block.values[lo:hi]
        base = block.base[r]
        kth = None
        if len(v) > k:
            kth = np.partition(v, len(v) - k)[len(v) - k]
            keep = v >= kth
            c, v = c[keep], v[keep]
        if kth is None or kth <= base:
            # unlisted candidates (at base) can place: the k lowest-index ones suffice
            free = np.setdiff1d(np.arange(min(block.num_candidates, len(listed) + k)),
                                listed)[:k]
            c = np.concatenate([c, free])
            v = np.concatenate([v, np.full(len(free), base, dtype=v.dtype)])
        best = np.lexsort((c, -v))[:k]
        out.append((c[best], v[best]))
    return out
