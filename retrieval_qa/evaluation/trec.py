"""TREC runs and qrels: written from a run file of ``rqa evaluate``, read back as inputs of
``rqa metrics`` and ``rqa compare``.

Written (:func:`write_trec`): a run, ``qid Q0 docid rank score tag``, the top ``top_k`` of
each question (the ``eval`` group's, what the run file lists) ranked 1..k in the order
trec_eval reads them (descending score, tied scores by descending docid), so the rank column
and trec_eval agree; qrels, ``qid 0 docid 1``, one line per gold candidate. ``qid`` is the
question's id where the pool's unit is one (MultiReQA's qid, a collection's query id), else
its row in the pool (the ``id`` of the per-question record). A list whose scores do not fall
in its order (a pipeline's reranked head above the first stage's tail) keeps its order: its
scores are written as ``k - rank + 1`` and the output says so.

Read (:func:`read_run`, :func:`read_qrels`, :func:`trec_record`): what the metrics of a TREC
run are is :data:`PROTOCOL`. They are not the protocol's exact numbers: a run lists only the
top k, and tied scores are ordered by docid where the protocol gives them their average rank
(docs/evaluation.md). The exact MRR comes from this suite's own run files and per-question
records only."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np

from ..errors import DataFormatError
from ..written import atomic_path

PROTOCOL = ("TREC run: a question's rank is the position of its first relevant candidate "
            "among those the run lists for it, ordered as trec_eval orders them (descending "
            "score, tied scores by descending docid; the rank column is not read), and a "
            "question with none listed counts 0; so mrr@K is MRR over the top K listed (K "
            "the run's depth, the most candidates it lists for a question) and r@k (= p@k) "
            "the share of questions with a relevant candidate in the top k (trec_eval's "
            "success@k), for k <= K. The questions are those of the qrels with a relevant "
            "judgement (> 0), those absent from the run included (trec_eval -c). Not the "
            "protocol's exact MRR (average rank over tied scores, gold among every "
            "candidate): that comes from rqa's own run files and per-question records.")
RUN_FIX = ("one line per retrieved candidate: qid Q0 docid rank score tag (whitespace-"
           "separated), e.g. the --trec-run of rqa evaluate")
QRELS_FIX = ("one judgement a line: qid 0 docid relevance (TREC), or BEIR's qrels TSV under "
             "its header query-id<TAB>corpus-id<TAB>score")


def _lines(path: str | Path, fix: str):
    try:
        with open(path, encoding="utf-8-sig") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    yield number, line
    except UnicodeDecodeError as e:
        raise DataFormatError(path, f"byte {e.start}", "not UTF-8 text", fix) from None


def is_trec_run(path: str | Path) -> bool:
    """Whether a file reads as a TREC run: its first line that is not blank has the six
    whitespace-separated fields of one and is not a JSON object.

    Args:
        path: the file.
    """
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    return not line.lstrip().startswith("{") and len(line.split()) == 6
    except (UnicodeDecodeError, OSError):
        return False
    return False


def trec_order(ids: list[str], scores: list[float]) -> list[int]:
    """The positions of a question's listed candidates in trec_eval's order: descending
    score, tied scores by descending docid (byte order, as its ``strcmp``).

    Args:
        ids: the candidates' ids.
        scores: their scores.

    Example:

        >>> trec_order(["a", "c", "b"], [1.0, 1.0, 2.0])
        [2, 1, 0]
    """
    order = sorted(range(len(ids)), key=lambda i: ids[i].encode(), reverse=True)
    order.sort(key=lambda i: -scores[i])  # stable: tied scores keep the docid order
    return order


def _field_id(value, what: str, path, where: str) -> str:
    text = str(value)
    if not text or any(ch.isspace() for ch in text):
        raise DataFormatError(path, where, f"{what} {text!r} is empty or holds whitespace: a "
                              "TREC line cannot name it", "give the pool ids without "
                              "whitespace (a collection's _id)")
    return text


def write_trec(run_file: str | Path, run: str | Path | None = None,
               qrels: str | Path | None = None, tag: str = "rqa") -> dict:
    """The TREC run and / or qrels of a run file (see the module docstring).

    Args:
        run_file: a run file of ``rqa evaluate`` (or of a pipeline's stage).
        run: where to write the TREC run; None: none.
        qrels: where to write the TREC qrels; None: none.
        tag: the run's tag (the last column; whitespace becomes ``_``).

    Returns:
        What was written: the files, the questions, the depth and how scores were written.
    """
    from .runfile import read_records

    records = read_records(run_file)
    tag = "_".join(str(tag).split()) or "rqa"
    out: dict = {"questions": len(records), "protocol": PROTOCOL}
    if run is not None:
        lines, depth, reordered = [], 0, 0
        for row, rec in enumerate(records):
            where = f"record {row + 1}"
            qid = _field_id(rec.get("question_id", row), "question id", run_file, where)
            ids = [_field_id(c, "candidate id", run_file, where) for c in rec["top_ids"]]
            scores = [float(s) for s in rec["top_scores"]]
            if all(a >= b for a, b in zip(scores, scores[1:], strict=False)):
                order = trec_order(ids, scores)
            else:  # tiers (a reranked head): the list's order, scores that follow it
                order, scores = list(range(len(ids))), [float(len(ids) - i)
                                                        for i in range(len(ids))]
                reordered += 1
            depth = max(depth, len(ids))
            lines += [f"{qid} Q0 {ids[i]} {rank} {scores[i]!r} {tag}\n"
                      for rank, i in enumerate(order, 1)]
        with atomic_path(run, "--trec-run") as tmp:
            tmp.write_text("".join(lines), encoding="utf-8")
        out.update(run=str(run), depth=depth, tag=tag, lines=len(lines),
                   scores_replaced_by_rank=reordered)
    if qrels is not None:
        lines = []
        for row, rec in enumerate(records):
            where = f"record {row + 1}"
            qid = _field_id(rec.get("question_id", row), "question id", run_file, where)
            if "gold_ids" not in rec:
                raise DataFormatError(run_file, where, "no gold_ids", "write the run file "
                                      "again with this version of rqa evaluate")
            lines += [f"{qid} 0 {_field_id(c, 'candidate id', run_file, where)} 1\n"
                      for c in rec["gold_ids"]]
        with atomic_path(qrels, "--trec-qrels") as tmp:
            tmp.write_text("".join(lines), encoding="utf-8")
        out.update(qrels=str(qrels), judgements=len(lines))
    return out


def _number(text: str, path, where: str, what: str, fix: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise DataFormatError(path, where, f"{what} {text!r} is not a finite number", fix)
    return value


def read_run(path: str | Path) -> dict[str, tuple[list[str], list[float]]]:
    """A TREC run: per question id, its candidates and scores in the file's order, each line
    checked (six fields, a whole-number rank, a finite score, no candidate twice for a
    question); a bad line is a DataFormatError naming the file, the line and the fix.

    Args:
        path: the run file.
    """
    out: dict[str, tuple[list[str], list[float]]] = {}
    seen: dict[tuple[str, str], int] = {}
    for number, line in _lines(path, RUN_FIX):
        where = f"line {number}"
        fields = line.split()
        if len(fields) != 6:
            raise DataFormatError(path, where, f"{len(fields)} fields, a TREC run line has 6",
                                  RUN_FIX)
        qid, _, doc, rank, score, _ = fields
        if not rank.isdigit():
            raise DataFormatError(path, where, f"rank {rank!r} is not a whole number", RUN_FIX)
        value = _number(score, path, where, "score", RUN_FIX)
        if (qid, doc) in seen:
            raise DataFormatError(path, where, f"docid {doc!r} listed again for qid {qid!r} "
                                  f"(line {seen[qid, doc]})", RUN_FIX)
        seen[qid, doc] = number
        ids, scores = out.setdefault(qid, ([], []))
        ids.append(doc)
        scores.append(value)
    if not out:
        raise DataFormatError(path, "whole file", "no lines (an empty file)", RUN_FIX)
    return out


def read_qrels(path: str | Path) -> dict[str, dict[str, float]]:
    """Judgements: TREC qrels (``qid iter docid relevance``) or BEIR's qrels TSV (its header
    ``query-id<TAB>corpus-id<TAB>score``); per question id, in the file's order, its judged
    candidates and their relevance (> 0: relevant). A bad line is a DataFormatError naming
    the file, the line and the fix.

    Args:
        path: the qrels file.
    """
    out: dict[str, dict[str, float]] = {}
    beir = None
    for number, line in _lines(path, QRELS_FIX):
        where = f"line {number}"
        if beir is None:
            beir = line.lower().startswith("query-id")
            if beir:
                continue
        fields = line.rstrip("\r\n").split("\t") if beir else line.split()
        if len(fields) != (3 if beir else 4):
            raise DataFormatError(path, where, f"{len(fields)} fields, a "
                                  f"{'BEIR qrels' if beir else 'TREC qrels'} line has "
                                  f"{3 if beir else 4}", QRELS_FIX)
        qid, doc, rel = (fields[0], fields[1], fields[2]) if beir else \
            (fields[0], fields[2], fields[3])
        judged = out.setdefault(qid.strip(), {})
        if doc.strip() in judged:
            raise DataFormatError(path, where, f"qid {qid!r} and docid {doc!r} judged again",
                                  QRELS_FIX)
        judged[doc.strip()] = _number(rel, path, where, "relevance", QRELS_FIX)
    if not out:
        raise DataFormatError(path, "whole file", "no judgements (an empty file)", QRELS_FIX)
    return out


def trec_ranks(run: dict, qrels: dict) -> tuple[list[str], np.ndarray, int, dict]:
    """Each judged question's rank in ``run`` under :data:`PROTOCOL` (``inf`` when no
    relevant candidate is listed), in the qrels' order; the run's depth; and the counts of
    what is not scored (questions of the run without judgements, judged questions with no
    relevant candidate, questions absent from the run).

    Args:
        run: :func:`read_run`'s.
        qrels: :func:`read_qrels`'s.
    """
    ids, ranks = [], []
    for qid, judged in qrels.items():
        relevant = {d for d, rel in judged.items() if rel > 0}
        if not relevant:
            continue
        listed, scores = run.get(qid, ([], []))
        order = [listed[i] for i in trec_order(listed, scores)]
        rank = next((r for r, d in enumerate(order, 1) if d in relevant), math.inf)
        ids.append(qid)
        ranks.append(float(rank))
    depth = max(len(ids_) for ids_, _ in run.values())
    counts = {"run_questions_without_judgements": len(set(run) - set(qrels)),
              "judged_questions_without_relevant": sum(
                  not any(r > 0 for r in j.values()) for j in qrels.values()),
              "questions_not_in_run": sum(q not in run for q in ids)}
    return ids, np.array(ranks, dtype=np.float64), depth, counts


def qrels_digest(qrels: dict) -> str:
    """16 hex digits naming the judged questions and their relevant candidates, in order.

    Args:
        qrels: ``{qid: {docid: relevance}}`` (:func:`read_qrels`).
    """
    h = hashlib.sha1()
    for qid, judged in qrels.items():
        h.update(qid.encode() + b"\x00" + ",".join(sorted(d for d, r in judged.items()
                                                         if r > 0)).encode() + b"\x01")
    return h.hexdigest()[:16]


def trec_record(run_path: str | Path, qrels_path: str | Path, ks):
    """A TREC run and its qrels as a per-question record (for ``rqa compare`` and ``rqa
    metrics``): ids the qrels' question ids, ranks under :data:`PROTOCOL` (``inf``: none
    listed), ``ks`` cut at the run's depth; the header names the protocol, the depth, the
    qrels digest and the counts of :func:`trec_ranks`.

    Args:
        run_path: the TREC run.
        qrels_path: its judgements (TREC qrels or BEIR's qrels TSV).
        ks: the cut-offs wanted (those beyond the depth are left out, listed in the header's
            ``ks_beyond_depth``).
    """
    from .per_question import PerQuestion

    qrels = read_qrels(qrels_path)
    ids, ranks, depth, counts = trec_ranks(read_run(run_path), qrels)
    if not ids:
        raise DataFormatError(qrels_path, "whole file", "no question has a relevant "
                              "judgement (> 0)", QRELS_FIX)
    header = {"format": "trec run", "questions": len(ids), "question_unit": None,
              "ks": [k for k in ks if k <= depth],
              "ks_beyond_depth": [k for k in ks if k > depth], "depth": depth,
              "qrels": str(qrels_path), "qrels_sha1": qrels_digest(qrels), **counts,
              "protocol": PROTOCOL}
    return PerQuestion(str(run_path), header, ids, ranks, None)


def trec_metrics(record) -> dict[str, float]:
    """The metrics of a TREC record (:func:`trec_record`) under :data:`PROTOCOL`:
    ``mrr@K`` (K its depth; and ``mrr@100`` when K > 100), ``r@k`` / ``p@k`` for its ks.

    Args:
        record: :func:`trec_record`'s.
    """
    depth = record.header["depth"]
    metrics = record.metrics()
    out = {f"mrr@{depth}": metrics["mrr"]}
    if depth > 100:
        out["mrr@100"] = metrics["mrr@100"]
    out.update({k: v for k, v in metrics.items() if k.startswith(("r@", "p@"))})
    return out
