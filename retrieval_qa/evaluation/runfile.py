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


#: the number of candidates of the pool a run file's records were ranked in (records written
#: before it have none: their ranks are then checked against no upper bound)
CANDIDATES_KEY = "pool_candidates"
#: the keys of a run file's records that hold ranks
RANK_KEYS = ("gold_rank", "doc_rank")


def rank_problem(value, key: str, candidates: int | None = None) -> str | None:
    """What makes ``value`` no rank of the protocol, or None: a rank is a finite number
    >= 1, a whole number or a half (the average over tied candidates: (first + last) / 2),
    and at most the pool's ``candidates`` when known. NaN passes ``value < 1`` (every
    comparison with NaN is false): it is refused here by name.

    Args:
        value: the number read.
        key: its name (``gold_rank``, ``doc_rank``), for the message.
        candidates: the pool's candidate count; None: unknown (no upper bound).

    Example:

        >>> rank_problem(2.5, "gold_rank"), rank_problem(float("nan"), "gold_rank")
        (None, 'gold_rank nan is not a rank (not a finite number)')
    """
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{key} {value!r} is not a rank (a number >= 1)"
    if not math.isfinite(value):
        return f"{key} {value!r} is not a rank (not a finite number)"
    if value < 1:
        return f"{key} {value!r} is not a rank (a number >= 1)"
    if (2 * value) % 1:
        return (f"{key} {value!r} is not a rank (ranks are whole numbers or halves: averages "
                "over tied candidates)")
    if candidates is not None and value > candidates:
        return f"{key} {value!r} is beyond the pool's {candidates} candidates"
    return None


def _pool_count(records: list[dict], key: str, path, what: str) -> int | None:
    """The count ``key`` the records carry (all the same whole number >= 1), None when none
    carries it; refused when they disagree or it is no count."""
    counts = {json.dumps(r.get(key)) for r in records}
    if not records or counts == {"null"}:
        return None
    n = records[0].get(key)
    if len(counts) != 1 or not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise refuse(Damaged(path, f"its records disagree on {key} (the pool's {what})"
                     if len(counts) != 1 else f"{key} {n!r} is not a count of {what}"),
                     "run file", REWRITE)
    return n


def _check_record(record: dict, candidates: int | None) -> str | None:
    """What is wrong with one record's numbers and lists, or None: its ranks
    (:func:`rank_problem`), ``top_scores`` finite numbers, ``top_ids`` without a repeat and
    as many as the scores."""
    import math

    for key in RANK_KEYS:
        if key in record and (problem := rank_problem(record[key], key, candidates)):
            return problem
    scores, ids = record.get("top_scores"), record.get("top_ids")
    if scores is not None:
        if not isinstance(scores, list):
            return f"top_scores {str(scores)[:40]!r} is not a list of scores"
        for i, v in enumerate(scores):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                return f"top_scores[{i}] {v!r} is not a finite score"
    if ids is not None:
        if not isinstance(ids, list) or len(set(map(str, ids))) != len(ids):
            return "top_ids lists a candidate twice (or is not a list)"
        if scores is not None and len(ids) != len(scores):
            return f"{len(ids)} top_ids for {len(scores)} top_scores"
    return None


def read_run_file(path: str | Path) -> list[dict]:
    """The records of a run file, each checked: a line that is not a JSON object, a rank
    that is not one (:func:`rank_problem`: NaN, infinite, below 1, not a whole number or a
    half, beyond the pool's ``pool_candidates`` when recorded), a score that is not finite,
    a candidate listed twice, or a ``question_id`` that two records hold is a
    :class:`~retrieval_qa.errors.DataFormatError` naming the file, the record and its line,
    and the fix; a file with another number of records than its ``pool_questions`` an
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
    records, lines = [], []
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
                lines.append(number)
    except UnicodeDecodeError as e:
        raise DataFormatError(path, f"byte {e.start}", "not UTF-8 text", fix) from None
    n = _pool_count(records, COUNT_KEY, path, "questions")
    if n is not None and n != len(records):
        raise refuse(Damaged(path, f"{len(records)} records for a pool of {n} questions "
                                   "(truncated)"), "run file", REWRITE)
    candidates = _pool_count(records, CANDIDATES_KEY, path, "candidates")
    seen: dict[str, int] = {}
    for number, (record, line) in enumerate(zip(records, lines, strict=True), 1):
        problem = _check_record(record, candidates)
        if problem is None and "question_id" in record:  # a unit's id: one record each
            key = json.dumps(record["question_id"])
            if key in seen:
                problem = (f"question_id {record['question_id']!r} again (record {seen[key]} "
                           "holds it): one record per question")
            seen[key] = number
        if problem is not None:
            raise DataFormatError(path, f"record {number} (line {line})", problem, fix)
    return records


def read_records(path: str | Path) -> list[dict]:
    """:func:`read_run_file`, and a file with no record is an error too.

    Args:
        path: the run file.
    """
    from ..errors import DataFormatError

    records = read_run_file(path)
    if not records:
        raise DataFormatError(path, "whole file", "no records (an empty file)",
                              "give a run file written by `rqa evaluate --run-file`; if this "
                              f"one was, {REWRITE}")
    return records


def _ranks(records: list[dict], key: str, path) -> list[float]:
    """The ``key`` of every record (a rank, :func:`rank_problem`; :func:`read_run_file`
    checked the values of those that hold one): a record without it is an error."""
    from ..errors import DataFormatError

    ranks = []
    for number, record in enumerate(records, 1):
        rank = record.get(key)
        problem = f"no {key!r}" if key not in record else rank_problem(rank, key)
        if problem is not None:
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
