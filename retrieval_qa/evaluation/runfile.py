"""Run files: one JSON line per question, enough to recompute every metric."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from .metrics import metrics_from_ranks


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
    """The records of a run file; a line that is not a JSON object is a
    :class:`~retrieval_qa.data.errors.DataFormatError` naming the file and the line."""
    from ..data.errors import DataFormatError

    fix = "give a run file written by `rqa evaluate --run-file` (one JSON object per line)"
    records = []
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataFormatError(path, f"line {number}", f"not JSON ({e.msg})",
                                          fix) from None
                if not isinstance(record, dict):
                    raise DataFormatError(path, f"line {number}", "not a JSON object", fix)
                records.append(record)
    except UnicodeDecodeError as e:
        raise DataFormatError(path, f"byte {e.start}", "not UTF-8 text", fix) from None
    return records


def _ranks(records: list[dict], key: str, path) -> list[float]:
    """The ``key`` of every record, each a number >= 1 (a rank)."""
    from ..data.errors import DataFormatError

    ranks = []
    for number, record in enumerate(records, 1):
        rank = record.get(key)
        if isinstance(rank, bool) or not isinstance(rank, (int, float)) or rank < 1:
            problem = (f"no {key!r}" if key not in record
                       else f"{key} {rank!r} is not a rank (a number >= 1)")
            raise DataFormatError(path, f"record {number}", problem,
                                  "give a run file written by `rqa evaluate --run-file`, "
                                  "whose records hold the gold ranks")
        ranks.append(rank)
    return ranks


def metrics_from_run_file(path: str | Path, ks) -> dict[str, float]:
    """Recompute the metrics from the gold ranks a run file records (and the document ranks
    when it has them)."""
    from ..data.errors import DataFormatError

    records = read_run_file(path)
    if not records:
        raise DataFormatError(path, "whole file", "no records",
                              "give a run file written by `rqa evaluate --run-file`")
    out = metrics_from_ranks(_ranks(records, "gold_rank", path), ks)
    if "doc_rank" in records[0]:
        out.update(metrics_from_ranks(_ranks(records, "doc_rank", path), ks, prefix="doc_"))
    return out
