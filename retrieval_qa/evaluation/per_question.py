"""Per-question records: the compact, committable trace of one evaluation.

One gzipped JSON-lines file per evaluation. Line 1 is a header::

    {"format": "rqa-per-question/1", "dataset": ..., "pool": ..., "question_unit": ...,
     "questions": N, "candidates": C, "pool_fingerprint": "<16 hex>",
     "question_texts_sha1": "<16 hex>", "ks": [1, 5, 10], "metrics": {...}}

then one line per question, in pool order::

    {"id": "17", "gold_rank": 3.5, "rr": 0.285714, "r@1": 0, "r@5": 1, "r@10": 1,
     "doc_rank": 1.0, "doc_rr": 1.0, "qword": "what", "answer_words": 23}

``id``: the question id when the pool's unit is one (MultiReQA's MRQA qid, a collection's
query id), else the question's row in the pool
(the pool fingerprint, a hash of the questions and their gold lists, says which pool; the
digest of the question texts is what a run file carries too, so `rqa compare` can check that
any two files hold the same questions before it pairs them).
``gold_rank`` / ``doc_rank`` are the protocol's ranks (average rank over ties, the best gold
copy), exact (halves at most); ``rr`` (6 digits) and the ``r@k`` hits are there to read, the
metrics are recomputed from the exact ranks, so :func:`read_per_question` reproduces the
evaluation's MRR / R@k exactly. ``qword`` (the question's first word, lower case) and
``answer_words`` (words of the first gold sentence) let a comparison be broken down by
question type and answer length without the data. About 100 KB for the ReQA SQuAD dev pool.

Read back by :func:`read_per_question`, which checks every number: the header's counts
(``candidates``: records written before it have none), ``ks`` and ``metrics`` (the metrics
recomputed from the ranks must agree, to the 4 decimals written); each row's ranks
(:func:`~retrieval_qa.evaluation.runfile.rank_problem`: finite, >= 1, whole or halves, at
most ``candidates``), ``rr`` / ``r@k`` / ``doc_rr`` agreeing with them, ``answer_words``;
and no ``id`` twice.

It is written by ``rqa evaluate`` beside its ``--run-file`` (``X.jsonl`` ->
``X.questions.jsonl.gz``) and by ``rqa train``'s test beside ``result.json``
(``per_question.jsonl.gz``); ``rqa compare`` reads it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..written import atomic_path
from .runfile import rank_problem

FORMAT = "rqa-per-question/1"
RUN_DIR_NAME = "per_question.jsonl.gz"  # beside a run's result.json
SUFFIX = ".questions.jsonl.gz"  # beside a run file: X.jsonl -> X.questions.jsonl.gz


def beside_run_file(run_file: str | Path) -> Path:
    """The per-question record written beside ``run_file``.

    Args:
        run_file: the run file (``X.jsonl``: ``X.questions.jsonl.gz``).
    """
    run_file = Path(run_file)
    stem = run_file.name[:-len(".jsonl")] if run_file.name.endswith(".jsonl") else run_file.name
    return run_file.with_name(stem + SUFFIX)


def pool_fingerprint(pool) -> str:
    """16 hex digits naming a pool's questions (or qids) and gold lists, in order: two records
    pair question by question only when their fingerprints agree.

    Args:
        pool: the :class:`~retrieval_qa.data.RetrievalPool`.
    """
    h = hashlib.sha1()
    for key, gold in zip(pool.question_keys, pool.gold, strict=True):
        h.update(key.encode("utf-8"))
        h.update(b"\x00" + ",".join(map(str, gold)).encode() + b"\x01")
    return h.hexdigest()[:16]


def question_texts_digest(texts) -> str:
    """16 hex digits naming the question texts in order: what a run file (which keeps the
    texts, not the gold lists) and a record of the same pool share, so any two of them can be
    checked to hold the same questions before they are paired.

    Args:
        texts: the question texts, in order.
    """
    return hashlib.sha1("\n".join(texts).encode("utf-8")).hexdigest()[:16]


def question_ids(pool) -> list[str]:
    """The ids of a pool's record rows: the pool's question ids, or the row numbers (as
    strings) when its unit is the question text or it has no ids.

    Args:
        pool: the :class:`~retrieval_qa.data.RetrievalPool`.
    """
    return list(pool.question_ids) if pool.question_unit != "question_text" and pool.question_ids \
        else [str(i) for i in range(len(pool.questions))]


def _words(text: str) -> list[str]:
    return text.split()


def build_records(pool, ranks, doc_ranks, ks) -> tuple[dict, list[dict]]:
    """The header and the rows of ``pool`` ranked with ``ranks`` ([Q]) and ``doc_ranks``.

    Args:
        pool: the :class:`~retrieval_qa.data.RetrievalPool`.
        ranks: ``[Q]`` the gold ranks (1-based, floats for ties).
        doc_ranks: ``[Q]`` the gold documents' ranks; None: none.
        ks: the cut-offs of R@k.
    """
    from .metrics import metrics_from_ranks

    ranks = np.asarray(ranks, dtype=np.float64)
    docs = None if doc_ranks is None else np.asarray(doc_ranks, dtype=np.float64)
    if len(ranks) != len(pool.questions):
        raise ValueError(f"{len(ranks)} ranks for {len(pool.questions)} questions")
    metrics = metrics_from_ranks(ranks, ks)
    if docs is not None:
        metrics.update(metrics_from_ranks(docs, ks, prefix="doc_"))
    header = {"format": FORMAT, "dataset": pool.dataset, "pool": pool.pool,
              "question_unit": pool.question_unit, "questions": len(ranks),
              "candidates": len(pool.candidates), "pool_fingerprint": pool_fingerprint(pool),
              "question_texts_sha1": question_texts_digest(pool.questions), "ks": list(ks),
              "metrics": {k: round(v, 4) for k, v in metrics.items()}}
    rows = []
    for q, (qid, rank) in enumerate(zip(question_ids(pool), ranks.tolist(), strict=True)):
        row = {"id": qid, "gold_rank": rank, "rr": round(1 / rank, 6),
               **{f"r@{k}": int(rank <= k) for k in ks}}
        if docs is not None:
            row["doc_rank"] = float(docs[q])
            row["doc_rr"] = round(1 / docs[q], 6)
        words = _words(pool.questions[q])
        row["qword"] = words[0].lower().strip("?,.\"'") if words else ""
        gold = pool.gold[q]
        row["answer_words"] = len(_words(pool.candidates[gold[0]].text)) if gold else 0
        rows.append(row)
    return header, rows


def write_records(path: str | Path, header: dict, rows: list[dict]) -> Path:
    """Write the header and rows as gzipped JSON lines, with no time stamp, so the same
    evaluation writes the same bytes.

    Args:
        path: the file to write.
        header: the first line.
        rows: one per question.
    """
    path = Path(path)
    text = "".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n"
                   for r in [header, *rows])
    with atomic_path(path) as tmp, open(tmp, "wb") as raw, \
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write(text.encode("utf-8"))
    return path


def write_per_question(path: str | Path, pool, ranks, doc_ranks, ks) -> Path:
    """Write the per-question record of ``pool`` ranked with ``ranks``
    (:func:`build_records`, :func:`write_records`).

    Args:
        path: the file to write.
        pool: the :class:`~retrieval_qa.data.RetrievalPool`.
        ranks: ``[Q]`` the gold ranks (1-based, floats for ties).
        doc_ranks: ``[Q]`` the gold documents' ranks; None: none.
        ks: the cut-offs of R@k.
    """
    return write_records(path, *build_records(pool, ranks, doc_ranks, ks))


@dataclass
class PerQuestion:
    """A per-question record (or a run file's ranks) read back, in the file's order.

    Attributes:
        path: the file read.
        header: its first line (``ks``, ``metrics``, the pool's counts and digests).
        ids: the questions' ids, in the file's order.
        ranks: ``[Q]`` float64 gold ranks.
        doc_ranks: ``[Q]`` float64 gold documents' ranks; None: not recorded.
        extra: per-question columns (``qword``, ``answer_words``) when recorded.
    """

    path: str
    header: dict
    ids: list[str]
    ranks: np.ndarray
    doc_ranks: np.ndarray | None
    extra: dict = field(default_factory=dict)  # per-question columns: qword, answer_words

    @property
    def ks(self) -> tuple[int, ...]:
        return tuple(self.header["ks"])  # written with every record (the eval group's ks)

    def metrics(self, ks=None) -> dict[str, float]:
        """The evaluator's metrics from the exact ranks (the same numbers)."""
        from .metrics import metrics_from_ranks

        out = metrics_from_ranks(self.ranks, ks or self.ks)
        if self.doc_ranks is not None:
            out.update(metrics_from_ranks(self.doc_ranks, ks or self.ks, prefix="doc_"))
        return out


def _error(path, where: str, problem: str):
    from ..errors import DataFormatError

    return DataFormatError(path, where, problem,
                           "give a per-question record written by `rqa evaluate --run-file` "
                           f"(*{SUFFIX}) or `rqa train` ({RUN_DIR_NAME}); if this one was, "
                           "it is damaged: write it again with the command that wrote it")


def _rank(value, path, where: str, key: str, candidates: int | None = None) -> float:
    problem = rank_problem(value, key, candidates)
    if problem is not None:
        raise _error(path, where, problem)
    return float(value)


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _finite(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and bool(np.isfinite(value)))


def _check_counts(header: dict, path) -> int | None:
    """The header's counts: ``questions``, and ``candidates`` when written. Returns the
    candidate count (None for records written before it)."""
    if not _count(header.get("questions")):
        raise _error(path, "line 1", f"questions {header.get('questions')!r} is not a count")
    candidates = header.get("candidates")
    if candidates is not None and not (_count(candidates) and candidates >= 1):
        raise _error(path, "line 1", f"candidates {candidates!r} is not a count")
    return candidates


def _check_ks_metrics(header: dict, path) -> None:
    """The header's ``ks`` (whole numbers >= 1, each once) and ``metrics`` (finite
    numbers)."""
    ks = header.get("ks")
    if not isinstance(ks, list) or not ks or not all(_count(k) and k >= 1 for k in ks) \
            or len(set(ks)) != len(ks):
        raise _error(path, "line 1", f"ks {ks!r} is not a list of cut-offs (whole numbers "
                                     ">= 1, each once)")
    metrics = header.get("metrics", {})
    if not isinstance(metrics, dict) or not all(_finite(v) for v in metrics.values()):
        raise _error(path, "line 1", "metrics holds a value that is not a finite number")


def _check_columns(row: dict, rank: float, doc: float | None, ks, path, where: str) -> None:
    """The columns written beside the exact ranks agree with them: ``rr`` / ``doc_rr`` (6
    digits), the ``r@k`` hits; ``answer_words`` a count."""
    for key, value in (("rr", rank), ("doc_rr", doc)):
        if key in row and value is not None and not (
                _finite(row[key]) and abs(row[key] - 1 / value) <= 1e-6):
            raise _error(path, where, f"{key} {row[key]!r} is not 1 / its rank ({value})")
    for k in ks:
        hit = row.get(f"r@{k}")
        if hit is not None and hit != int(rank <= k):
            raise _error(path, where, f"r@{k} {hit!r} disagrees with its gold_rank {rank}")
    if "answer_words" in row and not _count(row["answer_words"]):
        raise _error(path, where, f"answer_words {row['answer_words']!r} is not a count")


def _check_metrics(record: PerQuestion) -> None:
    """The header's metrics (4 decimals) are those of the ranks the rows hold."""
    recomputed = record.metrics()
    for key, written in record.header.get("metrics", {}).items():
        if key in recomputed and abs(written - recomputed[key]) > 1e-4:
            raise _error(record.path, "line 1", f"metrics {key} {written} disagrees with the "
                                                f"{recomputed[key]:.4f} of the rows' ranks")


def read_per_question(path: str | Path) -> PerQuestion:
    """A record file, every number checked (see the module docstring); a malformed one is a
    DataFormatError naming the file, the line and the fix.

    Args:
        path: a per-question record (gzipped JSON lines: a header, then one row per
            question), written by ``rqa evaluate --run-file`` or ``rqa train``.

    Returns:
        A :class:`PerQuestion`; ``.metrics()`` gives the evaluator's numbers again.

    Example:

        >>> record = read_per_question("runs/eval/bm25.per_question.jsonl.gz")  # doctest: +SKIP
        >>> record.metrics()["mrr"]  # doctest: +SKIP
    """
    if Path(path).is_file() and not Path(path).stat().st_size:
        raise _error(path, "whole file", "empty file")
    try:
        with gzip.open(path, "rb") as f:
            text = io.TextIOWrapper(f, encoding="utf-8").read()
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise _error(path, "whole file", f"not gzipped UTF-8 text ({e})") from None
    numbered = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    rows, lines = [], []
    for number, line in numbered:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise _error(path, f"line {number}", f"not JSON ({e.msg})") from None
        if not isinstance(rows[-1], dict):
            raise _error(path, f"line {number}", "not a JSON object")
        lines.append(number)
    if not rows or "format" not in rows[0]:
        raise _error(path, "line 1", f"no header with format {FORMAT!r}")
    if rows[0]["format"] != FORMAT:
        raise _error(path, "line 1", f"format {rows[0]['format']!r}; this version reads "
                                     f"{FORMAT!r}")
    header, rows, lines = rows[0], rows[1:], lines[1:]
    if len(rows) != header.get("questions"):
        raise _error(path, "whole file", f"{len(rows)} rows, the header says "
                                         f"{header.get('questions')} questions")
    if not rows:
        raise _error(path, "whole file", "no questions")
    candidates = _check_counts(header, path)
    ids, ranks, docs = [], [], []
    seen: dict[str, int] = {}
    has_docs = "doc_rank" in rows[0]
    ks = header.get("ks")
    ks = [k for k in ks if _count(k)] if isinstance(ks, list) else []  # checked below
    for number, row in zip(lines, rows, strict=True):
        where = f"line {number}"
        if "id" not in row or "gold_rank" not in row:
            raise _error(path, where, "no 'id' or 'gold_rank'")
        qid = row["id"]
        if isinstance(qid, bool) or not isinstance(qid, (str, int)):
            raise _error(path, where, f"id {qid!r} is not a question id")
        if str(qid) in seen:
            raise _error(path, where, f"id {qid!r} again (line {seen[str(qid)]} holds it): "
                                      "one row per question")
        seen[str(qid)] = number
        ids.append(str(qid))
        ranks.append(_rank(row["gold_rank"], path, where, "gold_rank", candidates))
        if has_docs:
            docs.append(_rank(row.get("doc_rank"), path, where, "doc_rank", candidates))
        _check_columns(row, ranks[-1], docs[-1] if has_docs else None, ks, path, where)
    _check_ks_metrics(header, path)
    extra = {k: [r.get(k) for r in rows] for k in ("qword", "answer_words") if k in rows[0]}
    record = PerQuestion(str(path), header, ids, np.array(ranks),
                         np.array(docs) if has_docs else None, extra)
    _check_metrics(record)
    return record


def from_run_file(path: str | Path, ks) -> PerQuestion:
    """A run file (``rqa evaluate --run-file``) as a record: ids are the MRQA qids when the
    records carry them, else the row (the pool's order, as the evaluator writes them); no
    pool fingerprint, but the digest of the question texts, which `rqa compare` checks. A run file keeps no ``ks``:
    the caller gives them (the eval group's).

    Args:
        path: a run file (``rqa evaluate --run-file``).
        ks: the cut-offs the record's ``metrics()`` uses.

    Example:

        >>> record = from_run_file("runs/eval/bm25.jsonl", ks=(1, 5))  # doctest: +SKIP
    """
    from .runfile import _ranks, read_records

    records = read_records(path)
    ids = [str(r["question_id"]) if "question_id" in r else str(i)
           for i, r in enumerate(records)]
    ranks = np.array(_ranks(records, "gold_rank", path), dtype=np.float64)
    docs = (np.array(_ranks(records, "doc_rank", path), dtype=np.float64)
            if "doc_rank" in records[0] else None)
    header = {"format": "run file", "questions": len(records), "ks": list(ks),
              "question_unit": records[0].get("question_unit"),
              "question_texts_sha1": question_texts_digest(r.get("question", "")
                                                           for r in records)}
    qwords = [(r.get("question", "").split() or [""])[0].lower().strip("?,.\"'")
              for r in records]
    return PerQuestion(str(path), header, ids, ranks, docs, {"qword": qwords})
