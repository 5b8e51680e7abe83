"""Any pool written as a collection (:mod:`.collection`), the layout ``rqa data export``
writes and ``--dataset collection:PATH`` reads back: the same candidates, questions and gold
lists, so every evaluation gives the same numbers on both.

``corpus.jsonl`` holds every candidate in the pool's order (``_id``, ``text``, ``context``,
``doc_id``); ``queries.jsonl`` one line per question unit in the pool's order; and
``qrels/<pool>.tsv`` one judgement (score 1) per gold candidate of each unit. A pool whose unit
is an id (MultiReQA's MRQA qid) keeps its ids; a ReQA pool, whose unit is the question text
(questions with the same text are one), gets one query per distinct text, its id the SQuAD id
of the first QA input asking it, and every candidate gold for that text (copies of the same
sentence in other paragraphs too) in its judgements."""

from __future__ import annotations

import json
from pathlib import Path

from ..written import atomic_dir
from .collection import CORPUS, QRELS, QUERIES
from .types import RetrievalPool


def query_ids(pool: RetrievalPool) -> tuple[list[str], str]:
    """Each question unit's query id and where the ids come from: the pool's ids (an id
    unit), else the id of the first QA input asking the question (ReQA: the SQuAD id), else
    (ids missing, repeated, or holding a tab or line break) ``q<row>``.

    Args:
        pool: the pool.
    """
    if pool.by_id:
        return list(pool.question_ids), "the pool's question ids"
    first: dict[str, str] = {}
    for pair in pool.pairs:
        first.setdefault(pool.pair_key(pair), pair.question_id)
    ids = [first.get(key, "") for key in pool.question_keys]
    if all(ids) and len(set(ids)) == len(ids) and not any(
            ch in i for i in ids for ch in "\t\r\n"):
        return ids, "the id of the first QA input asking each question"
    return [f"q{i}" for i in range(len(ids))], "q<row>: the pool's order"


def _check_id(value: str, what: str) -> str:
    if not value.strip() or any(ch in value for ch in "\t\r\n"):
        raise ValueError(f"{what} id {value!r} is empty or holds a tab or a line break: a "
                         "qrels line cannot name it (fix: give the pool's candidates ids "
                         "without them)")
    return value


def write_collection(pool: RetrievalPool, folder: str | Path, what: str = "--output") -> dict:
    """Write ``pool`` as a collection in ``folder`` (replaced whole, atomically: written in
    full or not at all), its split named after the pool.

    Args:
        pool: the pool to write.
        folder: the collection's folder.
        what: where the folder was given, for the errors.

    Returns:
        What was written: the folder, its files, the split and the counts.

    Example:

        >>> pool, _ = load_pool("reqa_squad", "dev")  # doctest: +SKIP
        >>> write_collection(pool, "collections/reqa_squad-dev")["judgements"]  # doctest: +SKIP
    """
    qids, qid_source = query_ids(pool)
    split = pool.pool
    if not split or any(ch in split for ch in "/\\\t\r\n"):
        raise ValueError(f"pool name {split!r} cannot name a qrels file (fix: a pool name "
                         "without slashes)")
    judgements = 0
    with atomic_dir(folder, what) as tmp:
        with open(tmp / CORPUS, "w", encoding="utf-8") as f:
            for c in pool.candidates:
                row = {"_id": _check_id(c.id, "candidate"), "text": c.text,
                       "context": c.context, "doc_id": c.doc_id}
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        with open(tmp / QUERIES, "w", encoding="utf-8") as f:
            for qid, text in zip(qids, pool.questions, strict=True):
                row = {"_id": _check_id(qid, "question"), "text": text}
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        (tmp / QRELS).mkdir()
        with open(tmp / QRELS / f"{split}.tsv", "w", encoding="utf-8") as f:
            f.write("query-id\tcorpus-id\tscore\n")
            for qid, gold in zip(qids, pool.gold, strict=True):
                for c in gold:
                    f.write(f"{qid}\t{pool.candidates[c].id}\t1\n")
                    judgements += 1
    folder = Path(folder)
    return {"output": str(folder), "split": split,
            "files": [str(folder / CORPUS), str(folder / QUERIES),
                      str(folder / QRELS / f"{split}.tsv")],
            "candidates": len(pool.candidates), "questions": len(pool.questions),
            "judgements": judgements, "query_ids": qid_source,
            "read_back_with": f"--dataset collection:{folder} --pool {split}"}
