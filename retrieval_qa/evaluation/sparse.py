"""The ReQA rank rules on sparse score blocks, for scorers where most candidates of a question
share one score (BM25: every candidate with no query term scores the same).

A :class:`SparseScores` block lists, for some questions, the candidates whose score was
computed (each at most once per question) and one ``base`` score per question that every other
candidate has. The functions here give the same numbers as the dense rules in
:mod:`.ranking` on the full rows those blocks stand for, without materialising the rows:

* rank of the best gold: ``#(score > g) + (#(score == g) + 1) / 2`` counted over the listed
  entries plus the unlisted candidates (all at ``base``);
* document ranks: a paragraph scores the maximum of its sentences, listed or not;
* top-k: descending score, ties broken by ascending candidate index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class SparseScores:
    """Scores of ``num_rows`` questions over ``num_candidates`` candidates.

    ``rows[i]``, ``cols[i]``, ``values[i]``: question ``rows[i]`` (0-based within the block)
    scores candidate ``cols[i]`` with ``values[i]``; a (row, col) pair appears at most once.
    ``base[r]``: the score of every candidate of row ``r`` that is not listed.
    """

    rows: np.ndarray
    cols: np.ndarray
    values: np.ndarray
    base: np.ndarray
    num_candidates: int

    @property
    def num_rows(self) -> int:
        return len(self.base)

    def dense(self) -> np.ndarray:
        """The full [rows, candidates] matrix (for tests and small pools)."""
        out = np.repeat(self.base[:, None], self.num_candidates, axis=1)
        out[self.rows, self.cols] = self.values
        return out

    def first_non_finite(self) -> tuple[int, int | None, float] | None:
        """(row, candidate or None for an unlisted one, value) of a non-finite score."""
        bad = ~np.isfinite(self.base)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            return r, None, float(self.base[r])
        bad = ~np.isfinite(self.values)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return int(self.rows[i]), int(self.cols[i]), float(self.values[i])
        return None



class SparseRanker:
    """Applies the rank rules to :class:`SparseScores` blocks of at most ``max_rows`` rows.

    Scratch buffers of ``max_rows`` x candidates and x documents are kept between blocks and
    reset at the entries a block wrote, so the work per block is proportional to its listed
    entries, not to rows x candidates.
    """

    def __init__(self, num_candidates: int, doc_of: np.ndarray | None, max_rows: int) -> None:
        self.n_c = num_candidates
        self._pos = np.full(max_rows * num_candidates, -1, dtype=np.int64 if
                            max_rows * num_candidates >= 2**31 else np.int32)
        self.doc_of = doc_of
        if doc_of is not None:
            self.n_d = int(doc_of.max(initial=-1)) + 1
            self.doc_sizes = np.bincount(doc_of, minlength=self.n_d)
            cells = max_rows * self.n_d
            self._doc_best = np.full(cells, -np.inf, dtype=np.float32)
            self._doc_count = np.zeros(cells, dtype=np.int32)
            self._doc_mark = np.zeros(cells, dtype=np.int64)

    def gold_ranks(self, block: SparseScores, gold: list[list[int]]) -> np.ndarray:
        """[rows] float64: average-tie rank of each row's best-scored gold candidate."""
        n = block.num_rows
        if len(gold) != n or any(not g for g in gold):
            raise ValueError("every question needs at least one gold candidate")
        keys = block.rows * self.n_c + block.cols
        self._pos[keys] = np.arange(len(keys))
        g_rows, g_cols = _flatten(gold)
        at = self._pos[g_rows * self.n_c + g_cols]
        self._pos[keys] = -1
        g_scores = block.base[g_rows]
        hit = at >= 0
        g_scores[hit] = block.values[at[hit]]
        best = _row_max(g_rows, g_scores, n)
        listed = np.bincount(block.rows, minlength=n)
        return _average_rank(block.rows, block.values, best, block.base, listed, self.n_c)

    def doc_ranks(self, block: SparseScores, doc_gold: list[list[int]]) -> np.ndarray:
        """[rows] float64: average-tie rank of each row's best gold document, a document
        scoring the maximum of its candidates' scores (listed or at ``base``)."""
        if self.doc_of is None:
            raise ValueError("built without doc_of")
        n, n_d = block.num_rows, self.n_d
        keys = block.rows * n_d + self.doc_of[block.cols]
        np.maximum.at(self._doc_best, keys, block.values)
        np.add.at(self._doc_count, keys, 1)
        order = np.arange(len(keys))
        self._doc_mark[keys] = order
        uniq = keys[self._doc_mark[keys] == order]  # one entry per (row, document)
        rows, docs = np.divmod(uniq, n_d)
        scores = self._doc_best[uniq]
        partly = self._doc_count[uniq] < self.doc_sizes[docs]
        scores = np.where(partly, np.maximum(scores, block.base[rows]), scores)
        g_rows, g_docs = _flatten(doc_gold)
        g_keys = g_rows * n_d + g_docs
        touched = self._doc_count[g_keys] > 0
        g_scores = np.where(touched, self._doc_best[g_keys], block.base[g_rows])
        partly_g = touched & (self._doc_count[g_keys] < self.doc_sizes[g_docs])
        g_scores = np.where(partly_g, np.maximum(g_scores, block.base[g_rows]), g_scores)
        self._doc_best[uniq] = -np.inf
        self._doc_count[uniq] = 0
        best = _row_max(g_rows, g_scores, n)
        listed = np.bincount(rows, minlength=n)
        return _average_rank(rows, scores, best, block.base, listed, n_d)

    @staticmethod
    def top_k(block: SparseScores, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per row: (candidate indices, scores) of the ``k`` best, by descending score then
        ascending candidate index."""
        k = min(k, block.num_candidates)
        rows = block.rows.astype(np.uint16) if block.num_rows < 2**16 else block.rows
        order = np.argsort(rows, kind="stable")
        cols, vals = block.cols[order], block.values[order]
        bounds = np.searchsorted(block.rows[order], np.arange(block.num_rows + 1))
        out = []
        for r in range(block.num_rows):
            listed = cols[bounds[r]:bounds[r + 1]]
            c, v = listed, vals[bounds[r]:bounds[r + 1]]
            base = block.base[r]
            if len(v) > k:
                kth = np.partition(v, len(v) - k)[len(v) - k]
                keep = v >= kth
                c, v = c[keep], v[keep]
            else:
                kth = None
            if kth is None or kth <= base:
                # unlisted candidates (at base) can place: the k lowest-index ones suffice
                free = np.setdiff1d(np.arange(min(block.num_candidates, len(listed) + k)),
                                    listed)[:k]
                c = np.concatenate([c, free])
                v = np.concatenate([v, np.full(len(free), base, dtype=v.dtype)])
            best = np.lexsort((c, -v))[:k]
            out.append((c[best], v[best]))
        return out


def _flatten(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    rows = np.repeat(np.arange(len(lists)), [len(x) for x in lists])
    cols = np.fromiter((c for x in lists for c in x), dtype=np.int64, count=len(rows))
    return rows, cols


def _row_max(rows: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    best = np.full(n, -np.inf, dtype=values.dtype)
    np.maximum.at(best, rows, values)
    return best


def _average_rank(row_of: np.ndarray, values: np.ndarray, threshold: np.ndarray,
                  base: np.ndarray, listed: np.ndarray, width: int) -> np.ndarray:
    """Average-tie rank of ``threshold[r]`` among row r's ``width`` scores: the listed
    ``values`` (``row_of`` gives their rows, ``listed[r]`` how many) and ``width - listed[r]``
    scores at ``base[r]``."""
    n = len(threshold)
    t = threshold[row_of]
    greater = np.bincount(row_of, weights=values > t, minlength=n).astype(np.float64)
    equal = np.bincount(row_of, weights=values == t, minlength=n).astype(np.float64)
    rest = (width - listed).astype(np.float64)
    greater += np.where(base > threshold, rest, 0.0)
    equal += np.where(base == threshold, rest, 0.0)
    return greater + (equal + 1.0) / 2.0
