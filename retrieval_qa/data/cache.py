"""On-disk Arrow cache of built pools, keyed by the source files' sha256 and builder versions.

A cache folder is written whole and renamed (:func:`~retrieval_qa.written.atomic_dir`);
``meta.json`` records :data:`CACHE_FORMAT`. A folder that cannot be read back (a file missing,
empty, truncated or garbage, another format, tables that disagree) is :class:`~retrieval_qa.
written.Damaged`, naming the file: the loader rebuilds the pool with a warning."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from ..written import DAMAGE, Damaged, atomic_dir, check, read_back, read_json
from .types import Candidate, QAPair, RetrievalPool, unit_by_id

#: the layout of a cache folder (its files, columns and meta keys); another one is rebuilt
CACHE_FORMAT = "rqa-pool-cache/2"


def cache_root(configured: str | Path | None = None) -> Path:
    """The cache folder: ``configured``, else $RQA_CACHE_DIR, else ``~/.cache/retrieval_qa``.

    Args:
        configured: the folder a caller was given; None: the environment or the default.
    """
    return Path(configured or os.environ.get("RQA_CACHE_DIR")
                or Path.home() / ".cache" / "retrieval_qa").expanduser()


def _write(table: pa.Table, path: Path) -> None:
    with ipc.new_file(path, table.schema) as writer:
        writer.write_table(table)


def _read(path: Path, columns: tuple[str, ...]) -> dict[str, list]:
    def read(p: Path) -> dict[str, list]:
        with ipc.open_file(p) as reader:
            table = reader.read_all().to_pydict()
        missing = [c for c in columns if c not in table]
        check(not missing, p, f"no column {missing}")
        return table

    return read_back(path, read, "an Arrow table")


def save_pool(pool: RetrievalPool, notes: dict, folder: Path) -> None:
    """Write a pool and its build notes to its cache folder, atomically: a crash mid-write
    never leaves a half cache behind. A plain file where the cache folder goes is a damaged
    entry of the suite's own cache (reported when it was read): it is removed, so the folder
    can take its place.

    Args:
        pool: the pool.
        notes: its build notes.
        folder: the cache folder.
    """
    if folder.is_file() and not folder.is_symlink():
        folder.unlink()
    with atomic_dir(folder) as tmp:
        _save(pool, notes, tmp)


def _save(pool: RetrievalPool, notes: dict, tmp: Path) -> None:
    docs: dict[str, str] = {}
    for c in pool.candidates:
        docs.setdefault(c.doc_id, c.context)
    _write(pa.table({"doc_id": list(docs), "context": list(docs.values())}), tmp / "docs.arrow")
    _write(pa.table({"id": [c.id for c in pool.candidates],
                     "text": [c.text for c in pool.candidates],
                     "doc_id": [c.doc_id for c in pool.candidates]}), tmp / "candidates.arrow")
    _write(pa.table({"question": pool.questions,
                     "question_id": pool.question_ids or [None] * len(pool.questions),
                     "gold": pa.array(pool.gold, type=pa.list_(pa.int32()))},
                    schema=pa.schema([("question", pa.string()), ("question_id", pa.string()),
                                      ("gold", pa.list_(pa.int32()))])),
           tmp / "questions.arrow")
    _write(pa.table({"question": [p.question for p in pool.pairs],
                     "answer": [p.answer for p in pool.pairs],
                     "question_id": [p.question_id for p in pool.pairs],
                     "answer_id": [p.answer_id for p in pool.pairs]}), tmp / "pairs.arrow")
    (tmp / "meta.json").write_text(json.dumps({"format": CACHE_FORMAT, "dataset": pool.dataset,
                                               "pool": pool.pool, "source": pool.source,
                                               "question_unit": pool.question_unit,
                                               "notes": notes}))


def load_cached_pool(folder: Path) -> tuple[RetrievalPool, dict] | None:
    """The cached pool and its build notes; None when ``folder`` does not exist (never
    written); :class:`~retrieval_qa.written.Damaged` when it cannot be read back.

    Args:
        folder: the cache folder.
    """
    if not os.path.lexists(folder):
        return None
    check(folder.is_dir(), folder, "not a folder")
    try:
        return _load(folder)
    except Damaged:
        raise
    except DAMAGE as e:  # tables that read but do not fit together
        raise Damaged(folder, f"its tables do not agree ({e})") from None


def _load(folder: Path) -> tuple[RetrievalPool, dict]:
    meta_file = folder / "meta.json"
    meta = read_json(meta_file, ("dataset", "pool", "source", "question_unit", "notes"),
                     version=("format", CACHE_FORMAT))
    docs_t = _read(folder / "docs.arrow", ("doc_id", "context"))
    docs = dict(zip(docs_t["doc_id"], docs_t["context"], strict=True))
    c = _read(folder / "candidates.arrow", ("id", "text", "doc_id"))
    unknown = sorted(set(c["doc_id"]) - set(docs))
    check(not unknown, folder / "candidates.arrow",
          f"document {unknown[:1]} is not in docs.arrow")
    candidates = [Candidate(i, t, docs[d], d) for i, t, d in zip(c["id"], c["text"], c["doc_id"],
                                                                   strict=True)]
    context_of = {cand.id: cand.context for cand in candidates}
    q = _read(folder / "questions.arrow", ("question", "question_id", "gold"))
    bad = [g for g in q["gold"] if not all(0 <= i < len(candidates) for i in g)]
    check(not bad, folder / "questions.arrow", f"gold list {bad[0] if bad else ''} points past "
                                               f"the {len(candidates)} rows of candidates.arrow")
    p = _read(folder / "pairs.arrow", ("question", "answer", "question_id", "answer_id"))
    unknown = sorted(set(p["answer_id"]) - set(context_of))
    check(not unknown, folder / "pairs.arrow", f"answer {unknown[:1]} is not in "
                                               "candidates.arrow")
    pairs = [QAPair(qq, a, context_of[aid], qid, aid) for qq, a, qid, aid in
             zip(p["question"], p["answer"], p["question_id"], p["answer_id"], strict=True)]
    unit = meta["question_unit"]
    qids = q["question_id"] if unit_by_id(unit) else []
    pool = RetrievalPool(meta["dataset"], meta["pool"], candidates, q["question"], q["gold"],
                         pairs, meta["source"], unit, qids)
    return pool, meta["notes"]
