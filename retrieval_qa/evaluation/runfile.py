"""Run files: one JSON line per question, enough to recompute every metric."""

from __future__ import annotations

import json
import os
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


class RunFileWriter:
    """Writes records as they come (a block at a time), to ``<path>.partial`` first, renamed
    to ``path`` only when the evaluation finished: a crash never leaves a run file that looks
    complete. ``path=None`` writes nothing (the writer is then falsy)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self.count = 0
        self._f = None

    def __bool__(self) -> bool:
        return self.path is not None

    def __enter__(self) -> RunFileWriter:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._partial = self.path.with_name(self.path.name + ".partial")
            self._f = open(self._partial, "w", encoding="utf-8")
        return self

    def write(self, records: Iterable[dict]) -> None:
        for rec in records:
            self._f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            self.count += 1
        self._f.flush()  # one block's records at a time leave memory

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._f is None:
            return
        self._f.close()
        if exc_type is None:
            os.replace(self._partial, self.path)
        else:
            self._partial.unlink(missing_ok=True)


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
