"""On-disk Arrow cache of built pools, keyed by the source files' sha256 and builder versions."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from .types import MRQA_QID, QUESTION_TEXT, Candidate, QAPair, RetrievalPool


def cache_root(configured: str | Path | None = None) -> Path:
    return Path(configured or os.environ.get("RQA_CACHE_DIR")
                or Path.home() / ".cache" / "retrieval_qa").expanduser()


def _write(table: pa.Table, path: Path) -> None:
    with ipc.new_file(path, table.schema) as writer:
        writer.write_table(table)


def _read(path: Path) -> dict[str, list]:
    with ipc.open_file(path) as reader:
        return reader.read_all().to_pydict()


def save_pool(pool: RetrievalPool, notes: dict, folder: Path) -> None:
    """Write atomically: a crash mid-write never leaves a half cache behind."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".tmp-"))
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
    (tmp / "meta.json").write_text(json.dumps({"dataset": pool.dataset, "pool": pool.pool,
                                               "source": pool.source,
                                               "question_unit": pool.question_unit,
                                               "notes": notes}))
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)


def load_cached_pool(folder: Path) -> tuple[RetrievalPool, dict] | None:
    if not (folder / "meta.json").is_file():
        return None
    meta = json.loads((folder / "meta.json").read_text())
    docs_t = _read(folder / "docs.arrow")
    docs = dict(zip(docs_t["doc_id"], docs_t["context"], strict=True))
    c = _read(folder / "candidates.arrow")
    candidates = [Candidate(i, t, docs[d], d) for i, t, d in zip(c["id"], c["text"], c["doc_id"],
                                                                   strict=True)]
    context_of = {cand.id: cand.context for cand in candidates}
    q = _read(folder / "questions.arrow")
    p = _read(folder / "pairs.arrow")
    pairs = [QAPair(qq, a, context_of[aid], qid, aid) for qq, a, qid, aid in
             zip(p["question"], p["answer"], p["question_id"], p["answer_id"], strict=True)]
    unit = meta.get("question_unit", QUESTION_TEXT)
    qids = q["question_id"] if unit == MRQA_QID else []
    pool = RetrievalPool(meta["dataset"], meta["pool"], candidates, q["question"], q["gold"],
                         pairs, meta["source"], unit, qids)
    return pool, meta["notes"]
