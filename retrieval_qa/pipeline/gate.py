"""The reranker's confidence gate: a question whose reranker is unsure keeps its fused order.

A question's confidence is the softmax probability of the reranker's best sentence over the
distinct sentences of its head. Identical copies count once: they get one score, and two
copies of the answer would otherwise halve a sure reranker's confidence. The threshold is
chosen on the validation side, among quantiles of the validation questions' confidences
(``reranker.gate: tune``, :func:`~.reranking.tune_rerank`), so no label of the evaluated pool is
read. Out of domain, a reranker that grows unsure leaves more questions to the fusion, and the
share of gated questions on a pool is itself a label-free sign of that.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..data.types import RetrievalPool

__all__ = ["confidences", "gate_candidates", "gated_weights"]


def confidences(pool: RetrievalPool, fused: Sequence[tuple], heads: Sequence[tuple]
                ) -> np.ndarray:
    """Per question, the reranker's softmax probability of its best sentence among the
    distinct sentence texts of its head (1 for a head of one text).

    Args:
        pool: the pool whose candidates the lists index.
        fused: per question ``(ids, scores, ...)``, the fused list.
        heads: per question ``(positions, reranker scores)`` of its head
            (:func:`~.reranking.head_scores`).

    Returns:
        ``[Q]`` float64 confidences in ``(0, 1]``.

    Example:

        >>> import numpy as np
        >>> from retrieval_qa.data.types import Candidate, RetrievalPool
        >>> pool = RetrievalPool("toy", "dev", [Candidate("c0", "a", "", "p0"),
        ...                      Candidate("c1", "a", "", "p1"), Candidate("c2", "b", "", "p0")],
        ...                      questions=["q?"], gold=[[0, 1]])
        >>> fused = [(np.array([0, 1, 2]), np.array([3.0, 2.0, 1.0]))]
        >>> heads = [(np.array([0, 1, 2]), np.array([2.0, 2.0, 0.0]))]  # "a" twice, "b"
        >>> round(float(confidences(pool, fused, heads)[0]), 4)  # 1 / (1 + e^-2)
        0.8808
    """
    out = np.ones(len(heads))
    for q, (entry, (head, values)) in enumerate(zip(fused, heads, strict=True)):
        best: dict[str, float] = {}
        for c, v in zip(np.asarray(entry[0])[head], values, strict=True):
            text = pool.candidates[c].text
            best[text] = max(best.get(text, -np.inf), float(v))
        if len(best) > 1:
            s = np.fromiter(best.values(), dtype=np.float64)
            out[q] = 1.0 / np.exp(s - s.max()).sum()
    return out


def gate_candidates(val_confidences: np.ndarray, quantiles: Sequence[float]) -> list[float]:
    """The thresholds ``gate: tune`` tries: 0 (no gate) and the validation confidences'
    ``quantiles``, rounded to 6 places, without repeats, ascending.

    Args:
        val_confidences: ``[Q]`` the validation questions' confidences.
        quantiles: the quantiles to try, in ``[0, 1]``.

    Example:

        >>> gate_candidates(np.array([0.2, 0.4, 0.6, 0.8, 1.0]), [0.25, 0.5])
        [0.0, 0.4, 0.6]
    """
    found = np.quantile(val_confidences, list(quantiles)) if len(val_confidences) else []
    return sorted({0.0, *(round(float(t), 6) for t in found)})


def gated_weights(conf: np.ndarray, weight: float, threshold: float | None) -> np.ndarray:
    """Each question's share of the reranker: ``weight``, or 0 (the fused order) where its
    confidence is below ``threshold`` (None or 0: no gate).

    Args:
        conf: ``[Q]`` the questions' confidences (:func:`confidences`).
        weight: the reranker's share of the head's score.
        threshold: the gate; None or 0: no gate.

    Example:

        >>> gated_weights(np.array([0.9, 0.3]), 0.7, 0.5).tolist()
        [0.7, 0.0]
    """
    if not threshold:
        return np.full(len(conf), float(weight))
    return np.where(conf >= threshold, float(weight), 0.0)
