"""Run files: one JSON line per question, enough to recompute every metric."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from .metrics import DEFAULT_KS, metrics_from_ranks


def write_run_file(path: str | Path, records: Iterable[dict]) -> int:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
    return n


def read_run_file(path: str | Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def metrics_from_run_file(path: str | Path, ks=DEFAULT_KS) -> dict[str, float]:
    """Recompute the metrics from the gold ranks a run file records (and the document ranks
    when it has them)."""
    records = read_run_file(path)
    out = metrics_from_ranks([r["gold_rank"] for r in records], ks)
    if records and "doc_rank" in records[0]:
        out.update(metrics_from_ranks([r["doc_rank"] for r in records], ks, prefix="doc_"))
    return out
