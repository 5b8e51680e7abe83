"""Evaluate an exported dual-encoder model: encode questions and candidates once, then the
shared blocked exact search."""

from __future__ import annotations

import time

from ..data.types import RetrievalPool
from .evaluator import EvaluationResult, evaluate
from .search import DenseScorer


def evaluate_model(model, pool: RetrievalPool, *, batch_size: int = 128, progress: bool = True,
                   **evaluate_kwargs) -> EvaluationResult:
    """``model``: anything with ``encode_questions(list[str])`` and
    ``encode_answers(list[Candidate])`` returning [N, D] tensors (e.g. DualEncoderInference)."""
    start = time.perf_counter()
    questions = model.encode_questions(pool.questions, batch_size=batch_size, progress=progress)
    candidates = model.encode_answers(pool.candidates, batch_size=batch_size, progress=progress)
    encode_seconds = time.perf_counter() - start
    result = evaluate(pool, DenseScorer(questions, candidates), progress=progress,
                      **evaluate_kwargs)
    result.extra["encode_seconds"] = round(encode_seconds, 3)
    result.extra["question_embeddings"] = questions  # e.g. for the SSE of one-to-many subsets
    result.seconds += encode_seconds
    return result
