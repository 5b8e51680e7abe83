"""The readers of a collection's three files (:mod:`.collection`): ``corpus.jsonl`` and
``queries.jsonl`` (one JSON object a line) and ``qrels/<split>.tsv`` (tab-separated, BEIR's
header). Every problem is a :class:`~retrieval_qa.errors.DataFormatError` naming the file, the
line and the fix; a lenient read (``strict=False``) leaves the line out and lists it in the
file's :class:`~.read_report.ReadReport` instead."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataFormatError
from .io import unreadable
from .read_report import ReadReport
from .types import Candidate

JSONL_FIX = ("one JSON object a line, e.g. {\"_id\": \"c1\", \"text\": \"...\"} (docs/data.md, "
             "\"Your own collection\"); or --lenient to leave the line out (listed in the output)")
QRELS_HEADERS = (("query-id", "corpus-id", "score"), ("query-id", "corpus-id"))
QRELS_FIX = ("one judgement a line: query-id<TAB>corpus-id<TAB>score, under the header "
             "query-id<TAB>corpus-id<TAB>score (BEIR's layout); or --lenient to leave the line "
             "out (listed in the output)")


@dataclass
class Judgement:
    """One line of a qrels file: a query, a candidate and the relevance (> 0: relevant).

    Attributes:
        query: the query id.
        candidate: the corpus id.
        relevance: the score (> 0: relevant).
        line: its line in the file.
    """

    query: str
    candidate: str
    relevance: float
    line: int


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based number, text) of every line that is not blank (a byte-order mark before the
    first is not part of it)."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    yield number, line.rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as e:
        raise unreadable(path, e) from e


def _id(obj: dict, key: str) -> str | None:
    """The id at ``key`` as text (a JSON number is read as its digits), or None when it is
    missing, empty or of another type."""
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    value = str(value)
    return value if value.strip() else None


def _objects(path: Path, report: ReadReport, strict: bool, fields: tuple[str, ...],
             left_out: dict[str, str]) -> Iterator[tuple[int, str, str, dict]]:
    """(line, id, text, object) of every line of a JSON-lines file of ``_id`` / ``text``
    objects, each checked: JSON, an object, an id without tabs or line breaks (a qrels file
    could not name it), a text that is not empty; an id seen before is refused naming the
    line that holds it. ``fields``: the optional string fields, checked to be strings.
    ``left_out``: the id of each line a lenient read leaves out, with its line (so a judgement
    naming it can say why it is unknown)."""
    seen: dict[str, int] = {}
    for number, line in _lines(path):
        where = f"line {number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            report.add(DataFormatError(path, where, f"not JSON ({e.msg})", JSONL_FIX), strict)
            continue
        if not isinstance(obj, dict):
            report.add(DataFormatError(path, where, "not a JSON object", JSONL_FIX), strict)
            continue
        key = _id(obj, "_id")
        problem = None
        if key is None:
            problem = f"no '_id' (a string), got {obj.get('_id')!r}"
        elif any(ch in key for ch in "\t\r\n"):
            problem = f"_id {key!r} holds a tab or a line break (a qrels line could not name it)"
        elif key in seen:
            problem = f"_id {key!r} again (line {seen[key]} holds it): ids are unique"
        elif not isinstance(obj.get("text"), str):
            problem = f"_id {key!r}: no 'text' (a string), got {obj.get('text')!r}"
        elif not obj["text"].strip():
            problem = f"_id {key!r}: empty text"
        else:
            bad = [f for f in fields if obj.get(f) is not None and not isinstance(obj[f], str)
                   and not (f == "doc_id" and _id(obj, f) is not None)]
            if bad:
                problem = f"_id {key!r}: {bad[0]!r} should be a string, got {obj[bad[0]]!r}"
        if problem is not None:
            report.add(DataFormatError(path, where, problem, JSONL_FIX), strict)
            if key is not None and key not in seen:
                left_out.setdefault(key, f"{path.name} {where}")
            continue
        seen[key] = number
        yield number, key, obj["text"], obj


def read_corpus(path: str | Path, strict: bool = True, left_out: dict[str, str] | None = None
                ) -> tuple[list[Candidate], ReadReport]:
    """The candidates of ``corpus.jsonl``, in the file's order: ``_id``, ``text`` (the
    sentence), optional ``context`` (its paragraph; else BEIR's ``title``, else none) and
    optional ``doc_id`` (its document; else the candidate is a document of its own).

    Args:
        path: the corpus file.
        strict: a bad line is an error; False: left out and listed in the report.
        left_out: filled with the id of each line left out and where it is.

    Returns:
        (the candidates, the report of the lines left out).
    """
    path = Path(path)
    report = ReadReport(str(path))
    out = []
    fields = ("context", "title", "doc_id")
    for _, key, text, obj in _objects(path, report, strict, fields,
                                      {} if left_out is None else left_out):
        context = obj.get("context")
        if context is None:
            context = obj.get("title") or ""
        doc = _id(obj, "doc_id") or key
        out.append(Candidate(key, text, context, doc))
    return out, report


def read_queries(path: str | Path, strict: bool = True, left_out: dict[str, str] | None = None
                 ) -> tuple[dict[str, str], ReadReport]:
    """The questions of ``queries.jsonl``: ``{_id: text}`` in the file's order.

    Args:
        path: the queries file.
        strict: a bad line is an error; False: left out and listed in the report.
        left_out: filled with the id of each line left out and where it is.
    """
    path = Path(path)
    report = ReadReport(str(path))
    rows = _objects(path, report, strict, (), {} if left_out is None else left_out)
    return {key: text for _, key, text, _ in rows}, report


def _header(path: Path, first: tuple[int, str] | None) -> tuple[str, ...]:
    if first is None:
        raise DataFormatError(path, "whole file", "no header and no judgement (an empty "
                              "file)", "give the judgements of the split: " + QRELS_FIX)
    number, line = first
    fields = tuple(f.strip().lower() for f in line.split("\t"))
    if number != 1 or fields not in QRELS_HEADERS:
        raise DataFormatError(path, f"line {number}", f"{line[:60]!r} is not the header "
                              "query-id<TAB>corpus-id<TAB>score", "make the first line BEIR's "
                              "header: query-id<TAB>corpus-id<TAB>score")
    return fields


def read_qrels(path: str | Path, queries: dict[str, str], candidates: set[str],
               strict: bool = True, left_out: dict[str, str] | None = None
               ) -> tuple[list[Judgement], ReadReport]:
    """The judgements of ``qrels/<split>.tsv`` (BEIR: the header
    ``query-id<TAB>corpus-id<TAB>score``, then one judgement a line; without the score
    column every judgement is relevant), each checked: as many tab-separated fields as the
    header, a finite score, a query of ``queries`` and a candidate of ``candidates``, no pair
    judged twice.

    Args:
        path: the qrels file.
        queries: the query ids read (``queries.jsonl``).
        candidates: the candidate ids read (``corpus.jsonl``).
        strict: a bad line is an error; False: left out and listed in the report.
        left_out: ids a lenient read of the other files left out, with where (a judgement
            naming one is left out too, saying so).

    Returns:
        (the judgements in the file's order, the report of the lines left out).
    """
    path = Path(path)
    report = ReadReport(str(path))
    lines = _lines(path)
    columns = _header(path, next(lines, None))
    left_out = left_out or {}
    seen: dict[tuple[str, str], int] = {}
    out = []
    for number, line in lines:
        where = f"line {number}"
        fields = line.split("\t")
        problem = None
        if len(fields) != len(columns):
            spaced = len(line.split()) == len(columns)
            problem = (f"{len(fields)} tab-separated field(s), the header has {len(columns)}"
                       + (" (separated by spaces? the columns are separated by tabs)"
                          if spaced else ""))
        else:
            query, cand = fields[0].strip(), fields[1].strip()
            relevance = 1.0
            if len(columns) == 3:
                try:
                    relevance = float(fields[2])
                except ValueError:
                    relevance = math.nan
            if not math.isfinite(relevance):
                problem = f"score {fields[2]!r} is not a number"
            elif query not in queries:
                problem = (f"query-id {query!r} " + (f"was left out ({left_out[query]})"
                           if query in left_out else "is not in queries.jsonl"))
            elif cand not in candidates:
                problem = (f"corpus-id {cand!r} " + (f"was left out ({left_out[cand]})"
                           if cand in left_out else "is not in corpus.jsonl"))
            elif (query, cand) in seen:
                problem = (f"query-id {query!r} and corpus-id {cand!r} judged again (line "
                           f"{seen[query, cand]} holds them)")
        if problem is not None:
            report.add(DataFormatError(path, where, problem, QRELS_FIX), strict)
            continue
        seen[query, cand] = number
        out.append(Judgement(query, cand, relevance, number))
    return out, report
