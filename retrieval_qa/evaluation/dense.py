"""Evaluate an exported dual-encoder model: encode questions and candidates once, then the
shared blocked exact search."""

from __future__ import annotations

import time

from ..data.types import RetrievalPool
from .evaluator import EvaluationResult, evaluate
from .search import DenseScorer


def evaluate_model(model, pool: RetrievalPool, *, batch_size: int, progress: bool = True,
                   **evaluate_kwargs) -> EvaluationResult:
    """Encode the pool's questions and candidates with ``model`` and :func:`~.evaluator.evaluate`
    the dot-product ranking; a model on a GPU (its ``device``) is searched there too; the
    encoding time goes in ``extra["encode_seconds"]``.

    Args:
        model: anything with ``encode_questions(list[str])`` and
            ``encode_answers(list[Candidate])`` returning ``[N, D]`` tensors (e.g.
            DualEncoderInference).
        pool: the pool to rank.
        batch_size: texts per encoding batch.
        progress: show progress bars.
        **evaluate_kwargs: passed to :func:`~.evaluator.evaluate` (``top_k``, ``ks``...).
    """
    start = time.perf_counter()
    questions = model.encode_questions(pool.questions, batch_size=batch_size, progress=progress)
    candidates = model.encode_answers(pool.candidates, batch_size=batch_size, progress=progress)
    encode_seconds = time.perf_counter() - start
    device = getattr(model, "device", None)
    scorer = DenseScorer(questions, candidates,
                         device=device if device is not None and device.type == "cuda" else None)
    result = evaluate(pool, scorer, progress=progress,
                      **evaluate_kwargs)
    result.extra["encode_seconds"] = round(encode_seconds, 3)
    result.extra["question_embeddings"] = questions  # e.g. for the SSE of one-to-many subsets
    result.seconds += encode_seconds
    return result
