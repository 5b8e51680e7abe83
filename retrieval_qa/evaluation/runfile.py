"""Run files: one JSON line per question, enough to recompute every metric.

Each record carries ``pool_questions``, the number of questions of the pool it was written
for, so a file cut short at a line boundary is found (:func:`read_run_file`) instead of
giving other metrics; files written before that key are read as they are."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from pathlib import Path

from ..written import Damaged, atomic_path, refuse
from .metrics import metrics_from_ranks

COUNT_KEY = "pool_questions"
REWRITE = ("write it again with the command that wrote it (`rqa evaluate --run-file`, "
           "`rqa pipeline`)")


class RunFileWriter:
    """Writes records as they come (a block at a time), to ``<path>.partial`` first, renamed
    to ``path`` only when the evaluation finished: a crash, a full disk or Ctrl-C never leaves
    a run file that looks complete, nor the partial one (:func:`~retrieval_qa.written.
    atomic_path`: a link at ``path`` is written through, a device or folder refused).
    ``path=None`` writes nothing (the writer is then falsy).

    Args:
        path: the run file, or None.
        what: where the path was given, for the errors (e.g. ``--run-file``).
    """

    def __init__(self, path: str | Path | None, what: str = "run file") -> None:
        self.path = Path(path) if path is not None else None
        self.what = what
        self.count = 0
        self._f = None
        self._stack: contextlib.ExitStack | None = None

    def __bool__(self) -> bool:
        return self.path is not None

    def __enter__(self) -> RunFileWriter:
        if self.path is not None:
            with contextlib.ExitStack() as stack:
                tmp = stack.enter_context(atomic_path(self.path, self.what,
                                                      partial=".partial"))
                self._f = stack.enter_context(open(tmp, "w", encoding="utf-8"))
                self._stack = stack.pop_all()
        return self

    def write(self, records: Iterable[dict]) -> None:
        for rec in records:
            self._f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            self.count += 1
        self._f.flush()  # one block's records at a time leave memory

    def __exit__(self, exc_type, exc, tb) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:  # the file closed, then renamed (or removed, on an error)
            stack.__exit__(exc_type, exc, tb)


def read_run_file(path: str | Path) -> list[dict]:
    """The records of a run file; a line that is not a JSON object is a
    :class:`~retrieval_qa.errors.DataFormatError` naming the file and the line, a file
    with another number of records than its ``pool_questions`` an
    :class:`~retrieval_qa.errors.InputFileError` (truncated).

    Args:
        path: a run file (``rqa evaluate --run-file``; one JSON object per line).

    Returns:
        The records, in the file's order (an empty list for an empty file).

    Example:

        >>> records = read_run_file("runs/eval/bm25.jsonl")  # doctest: +SKIP
        >>> records[0]["gold_rank"], records[0]["top_ids"][:3]  # doctest: +SKIP
    """
    from ..errors import DataFormatError

    fix = ("give a run file written by `rqa evaluate --run-file` (one JSON object per line); "
           f"if this one was, it is damaged: {REWRITE}")
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
    counts = {r.get(COUNT_KEY) for r in records}
    if records and counts != {None}:
        n = counts.pop() if len(counts) == 1 else None
        if not isinstance(n, int) or isinstance(n, bool):
            raise refuse(Damaged(path, f"its records disagree on {COUNT_KEY}"), "run file",
                         REWRITE)
        if n != len(records):
            raise refuse(Damaged(path, f"{len(records)} records for a pool of {n} questions "
                                       "(truncated)"), "run file", REWRITE)
    return records


def read_records(path: str | Path) -> list[dict]:
    """:func:`read_run_file`, and a file with no record is an error too."""
    from ..errors import DataFormatError

    records = read_run_file(path)
    if not records:
        raise DataFormatError(path, "whole file", "no records (an empty file)",
                              "give a run file written by `rqa evaluate --run-file`; if this "
                              f"one was, {REWRITE}")
    return records


def _ranks(records: list[dict], key: str, path) -> list[float]:
    """The ``key`` of every record, each a number >= 1 (a rank)."""
    from ..errors import DataFormatError

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
    when it has them).

    Args:
        path: a run file (``rqa evaluate --run-file``).
        ks: the cut-offs of R@k / P@k.

    Example:

        >>> metrics_from_run_file("runs/eval/bm25.jsonl", ks=(1, 5))  # doctest: +SKIP
    """
    records = read_records(path)
    out = metrics_from_ranks(_ranks(records, "gold_rank", path), ks)
    if "doc_rank" in records[0]:
        out.update(metrics_from_ranks(_ranks(records, "doc_rank", path), ks, prefix="doc_"))
    return out
