"""The batch evaluator: exact search in bounded-memory blocks, ReQA rank rules, metrics and
an optional run file, at sentence and document level."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..data.types import RetrievalPool
from .metrics import DEFAULT_KS, metrics_from_ranks
from .ranking import gold_ranks
from .runfile import write_run_file
from .search import Scorer, rows_per_block


@dataclass
class EvaluationResult:
    metrics: dict[str, float]
    ranks: torch.Tensor
    doc_ranks: torch.Tensor | None
    questions: int
    candidates: int
    seconds: float
    run_file: str | None = None
    extra: dict = field(default_factory=dict)

    def summary(self) -> dict:
        return {"metrics": {k: round(v, 4) for k, v in self.metrics.items()},
                "questions": self.questions, "candidates": self.candidates,
                "seconds": round(self.seconds, 3), "run_file": self.run_file}


def gold_mask(gold: list[list[int]], rows, width: int) -> torch.Tensor:
    """[len(rows), width] bool: True at the gold candidates of each question in ``rows``."""
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for r, q in enumerate(rows):
        mask[r, gold[q]] = True
    return mask


def evaluate(pool: RetrievalPool, scorer: Scorer, *, top_k: int = 100, memory_mb: float = 512,
             ks=DEFAULT_KS, doc_level: bool = True, run_file: str | Path | None = None,
             progress: bool = True, desc: str = "evaluate") -> EvaluationResult:
    """Rank every candidate for every question of ``pool`` with ``scorer``.

    Memory is bounded by ``memory_mb`` whatever the pool size: questions are scored in blocks
    of rows, and for each block only the gold ranks and the top-k survive.
    """
    start = time.perf_counter()
    n_q, n_c = len(pool.questions), len(pool.candidates)
    if scorer.num_questions != n_q or scorer.num_candidates != n_c:
        raise ValueError(f"scorer covers {scorer.num_questions} x {scorer.num_candidates}, pool "
                         f"has {n_q} questions x {n_c} candidates")
    empty = [pool.questions[i] for i, g in enumerate(pool.gold) if not g]
    if empty:
        raise ValueError(f"{len(empty)} questions have no gold candidate, e.g. {empty[0]!r}")
    doc_names = sorted({c.doc_id for c in pool.candidates})
    doc_pos = {d: i for i, d in enumerate(doc_names)}
    doc_of = torch.tensor([doc_pos[c.doc_id] for c in pool.candidates], dtype=torch.long)
    doc_gold = [sorted({int(doc_of[c]) for c in g}) for g in pool.gold]
    step = rows_per_block(n_c, memory_mb)
    ranks = torch.empty(n_q, dtype=torch.float64)
    doc_ranks = torch.empty(n_q, dtype=torch.float64) if doc_level else None
    records: list[dict] = []
    k = min(top_k, n_c)
    with tqdm(total=n_q, desc=desc, unit="q", disable=not progress, leave=False) as bar:
        for lo in range(0, n_q, step):
            rows = range(lo, min(lo + step, n_q))
            scores = scorer.score(rows).float()
            ranks[lo:rows.stop] = gold_ranks(scores, gold_mask(pool.gold, rows, n_c))
            if doc_ranks is not None:
                doc_scores = torch.full((len(rows), len(doc_names)), float("-inf"))
                doc_scores.scatter_reduce_(1, doc_of.expand(len(rows), -1), scores, "amax")
                doc_ranks[lo:rows.stop] = gold_ranks(doc_scores,
                                                     gold_mask(doc_gold, rows, len(doc_names)))
            if run_file is not None:
                top = scores.topk(k, dim=1)
                for r, q in enumerate(rows):
                    rec = {"question": pool.questions[q], "gold_rank": ranks[q].item(),
                           "gold_ids": [pool.candidates[c].id for c in pool.gold[q]],
                           "top_ids": [pool.candidates[c].id for c in top.indices[r].tolist()],
                           "top_scores": [round(s, 6) for s in top.values[r].tolist()]}
                    if doc_ranks is not None:
                        rec["doc_rank"] = doc_ranks[q].item()
                    records.append(rec)
            bar.update(len(rows))
    metrics = metrics_from_ranks(ranks, ks)
    if doc_ranks is not None:
        metrics.update(metrics_from_ranks(doc_ranks, ks, prefix="doc_"))
    written = None
    if run_file is not None:
        write_run_file(run_file, records)
        written = str(run_file)
    return EvaluationResult(metrics, ranks, doc_ranks, n_q, n_c, time.perf_counter() - start,
                            written)

