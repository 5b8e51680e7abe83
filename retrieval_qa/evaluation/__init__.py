"""The shared evaluator: exact search, ReQA rank rules, metrics, run files, torchmetrics."""

from .evaluator import EvaluationResult, evaluate
from .metrics import metrics_from_ranks
from .rank_metrics import MeanReciprocalRank, RecallAtK, ReQARankMetric
from .ranking import aggregate_min, gold_ranks
from .runfile import metrics_from_run_file, read_run_file
from .search import DenseScorer, Scorer

__all__ = ["DenseScorer", "EvaluationResult", "MeanReciprocalRank", "ReQARankMetric",
           "RecallAtK", "Scorer", "aggregate_min", "evaluate", "gold_ranks",
           "metrics_from_ranks", "metrics_from_run_file", "read_run_file"]
