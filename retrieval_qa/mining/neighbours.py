"""Nearest candidates of a pool's questions, known positives removed: what the classifier's
negatives (BM25 and dense top 10) and the miner (dense top 10) draw from.

Known positives of a question (:func:`~retrieval_qa.data.pool_index.known_positives`):
every candidate whose sentence text is a gold answer of that question string, whatever the
unit (a question id in MultiReQA) and whatever the paragraph: a sentence that answers a
question somewhere answers it everywhere, so it is never a negative of that question and
never "mined" for it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..data.types import RetrievalPool

#: dense neighbours: question rows scored at once (a [rows, candidates] float32 block)
DENSE_BLOCK_ROWS = 256


def _keep(indices: Sequence[int], scores: Sequence[float], exclude: set[int], k: int
          ) -> list[tuple[int, float]]:
    out = []
    for i, s in zip(indices, scores, strict=True):
        if i >= 0 and i not in exclude:
            out.append((int(i), float(s)))
            if len(out) == k:
                break
    return out


def dense_neighbours(questions: torch.Tensor, candidates: torch.Tensor,
                     exclude: Sequence[set[int]], k: int, rows: range | None = None
                     ) -> list[list[tuple[int, float]]]:
    """For each question row in ``rows`` (default: all): up to ``k`` (candidate index, score)
    by descending inner product (ties: lower index first), ``exclude[row]`` left out.

    Args:
        questions: ``[Q, D]`` question embeddings as the retriever gives them (already
            normalised for cosine).
        candidates: ``[C, D]`` candidate embeddings, the same way.
        exclude: ``exclude[row]``, the candidate indices left out for that question.
        k: the neighbours kept per question.
        rows: the question rows; None: all.

    Example:

        >>> import torch
        >>> q = torch.tensor([[1.0, 0.0]])
        >>> c = torch.tensor([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
        >>> dense_neighbours(q, c, [{0}], k=2)
        [[(1, 0.5), (2, 0.0)]]
    """
    rows = rows if rows is not None else range(len(questions))
    cands = candidates.float()
    out: list[list[tuple[int, float]]] = []
    for lo in range(rows.start, rows.stop, DENSE_BLOCK_ROWS):
        hi = min(lo + DENSE_BLOCK_ROWS, rows.stop)
        scores = questions[lo:hi].float() @ cands.T
        extra = max((len(exclude[r]) for r in range(lo, hi)), default=0)
        width = min(k + extra, scores.shape[1])
        # stable order for equal scores: sort by (-score, index)
        top = torch.topk(scores, width, dim=1, sorted=True)
        for j, r in enumerate(range(lo, hi)):
            idx, val = top.indices[j].tolist(), top.values[j].tolist()
            order = sorted(range(len(idx)), key=lambda t: (-val[t], idx[t]))
            out.append(_keep([idx[t] for t in order], [val[t] for t in order], exclude[r], k))
    return out


def bm25_neighbours(pool: RetrievalPool, exclude: Sequence[set[int]], k: int, settings=None,
                    block_rows: int = 512) -> list[list[tuple[int, float]]]:
    """For each question of ``pool``: up to ``k`` (candidate index, BM25 score) over the
    pool's candidates, ``exclude`` left out, by descending score then ascending index.

    Args:
        pool: the pool.
        exclude: ``exclude[i]``, the candidate indices left out for question ``i``.
        k: the neighbours kept per question.
        settings: the :class:`~retrieval_qa.baselines.bm25.BM25Settings`; None:
            conf/model/bm25.yaml's.
        block_rows: the questions scored at a time.
    """
    from ..baselines.bm25 import BM25Scorer, BM25Settings
    from ..config import model_defaults
    from ..evaluation.sparse import top_k

    settings = settings or BM25Settings.from_config(model_defaults("bm25"))
    scorer = BM25Scorer(pool, settings)
    out: list[list[tuple[int, float]]] = []
    for lo in range(0, scorer.num_questions, block_rows):
        rows = range(lo, min(lo + block_rows, scorer.num_questions))
        block = scorer.score_sparse(rows)
        extra = max((len(exclude[r]) for r in rows), default=0)
        for r, (idx, val) in zip(rows, top_k(block, k + extra), strict=True):
            out.append(_keep(np.asarray(idx).tolist(), np.asarray(val).tolist(), exclude[r], k))
    return out
