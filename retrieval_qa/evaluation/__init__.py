"""The shared evaluator: exact search, ReQA rank rules, metrics, run files, torchmetrics.

The names are imported on first use (PEP 562), so ``rqa evaluate --model bm25`` and
``rqa metrics`` do not pay for torchmetrics, which only the training metrics need."""

from __future__ import annotations

from ..lazy import lazy_names

_WHERE = {"EvaluationResult": "evaluator", "evaluate": "evaluator",
          "metrics_from_ranks": "metrics", "MeanReciprocalRank": "rank_metrics",
          "RecallAtK": "rank_metrics", "ReQARankMetric": "rank_metrics",
          "aggregate_min": "ranking", "gold_ranks": "ranking",
          "metrics_from_run_file": "runfile", "read_run_file": "runfile",
          "DenseScorer": "search", "Scorer": "search"}

__all__ = sorted(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, _WHERE)
