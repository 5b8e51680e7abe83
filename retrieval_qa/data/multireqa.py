"""MultiReQA builder: sentence boundaries (candidates.json.gz) joined to MRQA contexts.

A boundary line is ``{"candidate_id": "<Dataset>_<qid1>/<qid2>/.../_<k>", "response_start",
"response_end"}`` with ``response_end`` exclusive, offsets into the MRQA context whose qids,
in order, are ``qid1/qid2/...``. A question's gold candidates are those of its own context
whose span contains one of its detected answer spans.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import DataFormatError
from .io import iter_json_lines
from .mrqa import MrqaContext
from .read_report import ReadReport
from .reqa import assemble_pool
from .types import MRQA_QID, Candidate, QAPair, RetrievalPool

BUILDER_VERSION = "multireqa-2"  # 2: one question per MRQA qid, not per string


@dataclass(frozen=True)
class Boundary:
    """One MultiReQA candidate: a sentence's span in an MRQA context.

    Attributes:
        candidate_id: its id (``<Dataset>_<qid>/.../_<k>``).
        context_key: the qids of its context, joined by '/' (:attr:`MrqaContext.key`).
        start: its start in the context.
        end: its end, exclusive.
    """
    candidate_id: str
    context_key: str
    start: int
    end: int


def parse_candidate_id(candidate_id: str) -> tuple[str, str, int]:
    """``'SQuAD_a/b/_3'`` -> ``('SQuAD', 'a/b', 3)``.

    Args:
        candidate_id: the id.
    """
    head, sep, index = candidate_id.rpartition("/_")
    dataset, sep2, key = head.partition("_")
    if not sep or not sep2 or not index.isdigit() or not key:
        raise ValueError(f"candidate_id {candidate_id!r} is not '<Dataset>_<qid>/.../_<k>'")
    return dataset, key, int(index)


def read_boundaries(path: str | Path, strict: bool = True) -> tuple[list[Boundary], ReadReport]:
    """Read a MultiReQA candidates file; returns (boundaries, report of skipped records).

    Args:
        path: the candidates file (``candidates.json.gz``).
        strict: a malformed record is an error; False: it is skipped and listed in the report.
    """
    path = Path(path)
    report = ReadReport(str(path))
    out: list[Boundary] = []
    seen: set[str] = set()
    for lineno, obj in iter_json_lines(path):
        record = f"line {lineno}"
        try:
            if not isinstance(obj, dict) or not {"candidate_id", "response_start",
                                                 "response_end"} <= obj.keys():
                raise DataFormatError(path, record, "needs candidate_id, response_start and "
                                      "response_end", "use the MultiReQA candidates layout")
            cid, s, e = obj["candidate_id"], obj["response_start"], obj["response_end"]
            try:
                _, key, _ = parse_candidate_id(cid)
            except ValueError as err:
                raise DataFormatError(path, record, str(err), "fix the candidate id") from err
            if not (isinstance(s, int) and isinstance(e, int) and 0 <= s < e):
                raise DataFormatError(path, f"{record} ({cid})", f"bad offsets [{s}, {e})",
                                      "offsets must be integers with start < end")
            if cid in seen:
                raise DataFormatError(path, f"{record} ({cid})", "duplicate candidate_id",
                                      "remove the repeated line")
        except DataFormatError as err:
            report.add(err, strict)
            continue
        seen.add(cid)
        out.append(Boundary(cid, key, s, e))
    return out, report


def build_multireqa(boundaries: list[Boundary], contexts: list[MrqaContext], dataset: str,
                    pool: str, boundaries_path: str = "", strict: bool = True,
                    source: str = "") -> tuple[RetrievalPool, dict]:
    """Join boundaries to contexts. Every boundary must resolve to a context and lie inside
    it. The evaluation unit is the MRQA question id (``question_unit="mrqa_qid"``): a
    templated string asked of several contexts stays several questions, each with its own
    context's gold. Question ids with no candidate containing an answer span are counted in
    the notes (``question_ids`` = ``questions_with_gold`` + ``questions_without_gold``), not
    silently lost.

    Args:
        boundaries: the candidates (:func:`read_boundaries`).
        contexts: the MRQA contexts (:func:`~.mrqa.read_mrqa`).
        dataset: the pool's dataset name.
        pool: the pool's name.
        boundaries_path: the candidates file, for the errors.
        strict: a boundary that resolves to no context, or lies outside it, is an error; False:
            it is skipped and counted in the notes.
        source: the pool's ``source`` sentence.
    """
    by_key = {c.key: c for c in contexts}
    report = ReadReport(boundaries_path)
    per_context: dict[str, list[Candidate]] = {}
    candidates: list[Candidate] = []
    for b in boundaries:
        ctx = by_key.get(b.context_key)
        try:
            if ctx is None:
                raise DataFormatError(boundaries_path, b.candidate_id,
                                      "no MRQA context has these qids",
                                      "use the MRQA file of the same dataset and split")
            if b.end > len(ctx.context):
                raise DataFormatError(boundaries_path, b.candidate_id,
                                      f"end {b.end} beyond the context (length "
                                      f"{len(ctx.context)}, MRQA line {ctx.line})",
                                      "use the MRQA file of the same dataset and split")
        except DataFormatError as err:
            report.add(err, strict)
            continue
        cand = Candidate(b.candidate_id, ctx.context[b.start:b.end].strip(), ctx.context,
                         b.context_key)
        candidates.append(cand)
        per_context.setdefault(b.context_key, []).append(cand)
    spans = {b.candidate_id: (b.start, b.end) for b in boundaries}
    pairs: list[QAPair] = []
    no_gold: list[str] = []
    for ctx in contexts:
        cands = per_context.get(ctx.key, [])
        for qa in ctx.qas:
            gold = [c for c in cands
                    if any(spans[c.id][0] <= s and e <= spans[c.id][1] for s, e in qa.spans)]
            if not gold:
                no_gold.append(qa.qid)
            for c in gold:
                pairs.append(QAPair(qa.question, c.text, ctx.context, qa.qid, c.id))
    built = assemble_pool(dataset, pool, candidates, pairs, "id", source, MRQA_QID)
    notes = {"question_unit": MRQA_QID,
             "question_ids": sum(len(ctx.qas) for ctx in contexts),
             "questions_with_gold": len(built.questions),
             "questions_without_gold": len(no_gold), "no_gold_qids": no_gold[:20],
             "skipped_boundaries": report.summary()}
    return built, notes
