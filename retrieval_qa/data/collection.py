"""A user's own collection as a pool: candidates, questions and judgements in BEIR's layout.

A collection is a folder::

    corpus.jsonl         {"_id": "c1", "text": "the sentence", "context": "its paragraph",
                          "doc_id": "p1"}   (context and doc_id optional; BEIR's "title" is
                          the context when there is no "context")
    queries.jsonl        {"_id": "q1", "text": "the question"}
    qrels/<split>.tsv    query-id<TAB>corpus-id<TAB>score   (the header, then one judgement
                          a line; score > 0: relevant)

named on the command line as ``--dataset collection:PATH`` (or a PATH to a folder holding
``corpus.jsonl``) with ``--pool SPLIT`` choosing ``qrels/SPLIT.tsv`` (default: ``test`` when
there is one, else the only split), and in a config as ``data.train_dataset=collection:PATH``.

The pool: every line of the corpus is a candidate (in the file's order), whatever the split;
the questions are the queries with at least one relevant judgement in the split (in the order
of ``queries.jsonl``), one unit per query id (``question_unit="question_id"``), gold the
candidates judged relevant (any score > 0: MRR and R@k are binary); the QA inputs (the
training pairs of a training split) one per relevant judgement. As in BEIR, ``queries.jsonl``
may hold the queries of every split: those the split's qrels do not name are not in it
(``queries_not_in_split``), and those judged with no relevant candidate are left out
(``questions_without_gold``); both are counted in the notes, never dropped silently. A
candidate without ``doc_id`` is a document of its own, one without context has none (its
paragraph is empty). Collections are read anew each time (not cached)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ..errors import InputFileError, did_you_mean
from .collection_files import read_corpus, read_qrels, read_queries
from .reqa import assemble_pool
from .sources import DATASETS
from .types import QUESTION_ID, QAPair, RetrievalPool

PREFIX = "collection:"
CORPUS, QUERIES, QRELS = "corpus.jsonl", "queries.jsonl", "qrels"
FORMAT_DOC = "docs/data.md, \"Your own collection\""


def collection_folder(dataset: str) -> Path | None:
    """The folder a dataset name points at: ``collection:PATH``, or a PATH (not a built-in
    name) to a folder holding ``corpus.jsonl``; None for any other name.

    Args:
        dataset: the name given (``--dataset``, ``data.train_dataset``).

    Example:

        >>> collection_folder("collection:~/data/scifact").name, collection_folder("reqa_squad")
        ('scifact', None)
    """
    if dataset.startswith(PREFIX):
        return Path(dataset[len(PREFIX):]).expanduser()
    if dataset in DATASETS or not dataset:
        return None
    folder = Path(dataset).expanduser()
    return folder if (folder / CORPUS).is_file() else None


def dataset_name(folder: str | Path) -> str:
    """The name a collection's pool carries (``collection:<folder name>``): what its outputs,
    records and the ledger show (a file name part: no path).

    Args:
        folder: the collection's folder.
    """
    return PREFIX + (Path(folder).resolve().name or "collection")


def splits(folder: str | Path) -> list[str]:
    """The splits of a collection: the names of its ``qrels/*.tsv`` files, sorted.

    Args:
        folder: the collection's folder.
    """
    return sorted(p.stem for p in (Path(folder) / QRELS).glob("*.tsv") if p.is_file())


def _check_folder(folder: Path) -> None:
    if not folder.is_dir():
        raise InputFileError("collection", folder, "is not a folder" if folder.exists()
                             else "does not exist", "give the folder holding corpus.jsonl, "
                             f"queries.jsonl and qrels/ ({FORMAT_DOC})")
    for name in (CORPUS, QUERIES, QRELS):
        if not (folder / name).exists():
            raise InputFileError("collection", folder, f"has no {name}", "a collection holds "
                                 f"corpus.jsonl, queries.jsonl and qrels/<split>.tsv ({FORMAT_DOC})")


def default_split(folder: str | Path) -> str:
    """The split evaluated when none is given: ``test`` when the collection has it, else its
    only split; several others are an error naming them (and so is a folder that is no
    collection).

    Args:
        folder: the collection's folder.
    """
    _check_folder(Path(folder))
    found = splits(folder)
    if "test" in found:
        return "test"
    if len(found) == 1:
        return found[0]
    if found:
        raise InputFileError("collection", folder, f"has the splits {', '.join(found)} in "
                             "qrels/, none of them test", "give the split with --pool SPLIT "
                             "(data.*_pool=SPLIT in a config)")
    raise InputFileError("collection", folder, "has no qrels/<split>.tsv",
                         f"write the judgements to qrels/test.tsv ({FORMAT_DOC})")


def load_collection(dataset: str | Path, split: str | None = None, strict: bool = True
                    ) -> tuple[RetrievalPool, dict]:
    """The pool of one split of a collection (see the module docstring) and notes on how it
    was read: the counts of queries, judgements and what was left out (and why).

    Args:
        dataset: ``collection:PATH`` or the folder.
        split: the split (``qrels/<split>.tsv``); None: :func:`default_split`.
        strict: a bad line (malformed JSON or TSV, a duplicate id, an empty text, a judgement
            naming an unknown id) is an error naming the file, the line and the fix; False:
            the line is left out and listed in the notes' ``skipped_records``.

    Returns:
        ``(RetrievalPool, notes)``.

    Example:

        >>> pool, notes = load_collection("collection:my/scifact", "test")  # doctest: +SKIP
        >>> pool.question_unit, notes["queries_not_in_split"]  # doctest: +SKIP
    """
    folder = collection_folder(str(dataset)) or Path(dataset)
    _check_folder(folder)
    split = split or default_split(folder)
    qrels = folder / QRELS / f"{split}.tsv"
    if not qrels.is_file():
        found = splits(folder)
        raise InputFileError("collection", folder, f"has no {QRELS}/{split}.tsv (its splits: "
                             f"{', '.join(found) or 'none'})",
                             f"{did_you_mean(split, found)}give one of its splits as --pool")
    left_out: dict[str, str] = {}
    candidates, corpus_report = read_corpus(folder / CORPUS, strict, left_out)
    queries, query_report = read_queries(folder / QUERIES, strict, left_out)
    judgements, qrels_report = read_qrels(qrels, queries, {c.id for c in candidates}, strict,
                                          left_out)
    index = {c.id: i for i, c in enumerate(candidates)}
    relevant: dict[str, list[int]] = {}
    judged: set[str] = set()
    for j in judgements:
        judged.add(j.query)
        if j.relevance > 0:
            relevant.setdefault(j.query, []).append(index[j.candidate])
    pairs = [QAPair(text, candidates[c].text, candidates[c].context, qid, candidates[c].id)
             for qid, text in queries.items() if qid in relevant
             for c in sorted(relevant[qid])]
    if not pairs:
        raise InputFileError("collection", qrels, f"no query has a relevant judgement (score "
                             f"> 0) among its {len(judgements)} judgements",
                             "give the split's relevant candidates a score of 1 or more")
    source = ", ".join(str(p) for p in (folder / CORPUS, folder / QUERIES, qrels))
    pool = assemble_pool(dataset_name(folder), split, candidates, pairs, "id", source,
                         QUESTION_ID)
    without = [q for q in queries if q in judged and q not in relevant]
    scores = Counter(f"{j.relevance:g}" for j in judgements)
    notes = {"collection": str(folder), "split": split, "question_unit": QUESTION_ID,
             "corpus_lines": len(candidates), "queries_in_file": len(queries),
             "question_ids": len(judged), "questions_with_gold": len(relevant),
             "questions_without_gold": len(without), "without_gold_ids": without[:20],
             "queries_not_in_split": len(queries) - len(judged),
             "judgements": len(judgements),
             "relevant_judgements": sum(j.relevance > 0 for j in judgements),
             "scores": dict(sorted(scores.items())),
             "candidates_with_context": sum(bool(c.context) for c in candidates),
             "skipped_records": [corpus_report.summary(), query_report.summary(),
                                 qrels_report.summary()]}
    return pool, notes
