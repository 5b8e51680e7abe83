"""A user's own collection (retrieval_qa/data/collection.py): BEIR's layout read as is, the
pool it makes (query ids as units, gold per candidate, every corpus line a candidate), what is
left out and counted, every bad line named with its file, line and fix (or left out and listed
with --lenient), and a pool written by the package's writer read back to the same pool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers import TINY_SQUAD, write_json_gz

from retrieval_qa.data import load_pool
from retrieval_qa.data.collection import collection_folder, default_split, load_collection
from retrieval_qa.data.collection_writer import write_collection
from retrieval_qa.errors import DataFormatError, InputFileError

CORPUS = [
    {"_id": "c1", "text": "Paris is the capital of France.",
     "context": "Paris is the capital of France. It has the Eiffel Tower.", "doc_id": "p1"},
    {"_id": "c2", "text": "It has the Eiffel Tower.",
     "context": "Paris is the capital of France. It has the Eiffel Tower.", "doc_id": "p1"},
    {"_id": "c3", "text": "Berlin is in Germany.", "title": "Germany", "metadata": {}},  # BEIR
    {"_id": "c4", "text": "Munich is in Bavaria."},
    {"_id": 5, "text": "Berlin is in Germany.", "doc_id": "p3"},  # a number id: its digits
]
QUERIES = [{"_id": "q1", "text": "What is the capital of France?"},
           {"_id": "q2", "text": "What tower is in Paris?"},
           {"_id": "q3", "text": "Where is Berlin?"},
           {"_id": "q4", "text": "Which state has Munich?"},
           {"_id": "q5", "text": "A question of another split?"}]
TEST = "query-id\tcorpus-id\tscore\nq1\tc1\t1\nq2\tc2\t2\nq3\tc3\t1\nq3\t5\t1\nq4\tc4\t0\n"
TRAIN = "query-id\tcorpus-id\tscore\nq4\tc4\t1\nq5\tc3\t1\n"


def write_tiny_collection(folder: Path, corpus=None, queries=None, splits=None) -> Path:
    """The tiny collection above (or the lines given: dicts as JSON, strings as they are)."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    for name, rows in (("corpus.jsonl", CORPUS if corpus is None else corpus),
                       ("queries.jsonl", QUERIES if queries is None else queries)):
        (folder / name).write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n"
                                           for r in rows), encoding="utf-8")
    for split, text in (splits or {"test": TEST, "train": TRAIN}).items():
        (folder / "qrels" / f"{split}.tsv").write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def tiny_collection(tmp_path) -> Path:
    return write_tiny_collection(tmp_path / "tiny")


def test_a_collection_is_a_pool_of_query_ids_with_gold_per_candidate(tiny_collection):
    pool, notes = load_pool(f"collection:{tiny_collection}", "test")
    assert (pool.dataset, pool.pool, pool.question_unit) == ("collection:tiny", "test",
                                                             "question_id")
    assert [c.id for c in pool.candidates] == ["c1", "c2", "c3", "c4", "5"]  # every line
    c3, c4 = pool.candidates[2], pool.candidates[3]
    assert (c3.context, c3.doc_id) == ("Germany", "c3")  # BEIR's title; its own document
    assert (c4.context, c4.doc_id) == ("", "c4")
    assert pool.question_ids == ["q1", "q2", "q3"] and pool.questions[2] == "Where is Berlin?"
    assert pool.gold == [[0], [1], [2, 4]]  # any score > 0; both copies judged for q3
    assert [(p.question_id, p.answer_id) for p in pool.pairs] == [
        ("q1", "c1"), ("q2", "c2"), ("q3", "c3"), ("q3", "5")]
    # judged with no relevant candidate (q4) and not in the split (q5): left out, counted
    assert (notes["question_ids"], notes["questions_with_gold"], notes["questions_without_gold"],
            notes["without_gold_ids"], notes["queries_not_in_split"]) == (4, 3, 1, ["q4"], 1)
    assert notes["scores"] == {"0": 1, "1": 3, "2": 1} and notes["judgements"] == 5
    assert all(r["skipped"] == 0 for r in notes["skipped_records"])
    train, _ = load_pool(str(tiny_collection), "train")  # a plain folder path works too
    assert train.question_ids == ["q4", "q5"] and len(train.candidates) == 5


def test_the_split_defaults_to_test_else_the_only_one(tiny_collection, tmp_path):
    assert default_split(tiny_collection) == "test"
    assert load_pool(f"collection:{tiny_collection}")[0].pool == "test"
    (tiny_collection / "qrels" / "test.tsv").rename(tiny_collection / "qrels" / "dev.tsv")
    with pytest.raises(InputFileError, match=r"splits dev, train.*none of them test.*--pool"):
        default_split(tiny_collection)
    (tiny_collection / "qrels" / "train.tsv").unlink()
    assert load_pool(f"collection:{tiny_collection}")[0].pool == "dev"
    with pytest.raises(InputFileError, match=r"no qrels/tset.tsv \(its splits: dev\)"):
        load_collection(tiny_collection, "tset")


def test_names_that_are_no_collection(tmp_path):
    assert collection_folder("reqa_squad") is None
    assert collection_folder(str(tmp_path)) is None  # a folder without corpus.jsonl
    with pytest.raises(InputFileError, match="does not exist"):
        load_pool(f"collection:{tmp_path / 'none'}", "test")
    (tmp_path / "corpus.jsonl").write_text('{"_id": "c", "text": "t"}\n')
    with pytest.raises(InputFileError, match="has no queries.jsonl"):
        load_pool(f"collection:{tmp_path}", "test")


BAD = {  # case: (file, its lines, where and what the error names)
    "not JSON": ("corpus", [CORPUS[0], '{"_id": "c2", "text": '], ["corpus.jsonl", "line 2",
                                                                   "not JSON"]),
    "not an object": ("corpus", [CORPUS[0], '["c2"]'], ["line 2", "not a JSON object"]),
    "duplicate id": ("corpus", [CORPUS[0], CORPUS[1], {"_id": "c1", "text": "again"}],
                     ["line 3", "_id 'c1' again (line 1 holds it)"]),
    "empty text": ("corpus", [CORPUS[0], {"_id": "c2", "text": "  "}],
                   ["line 2", "_id 'c2': empty text"]),
    "no id": ("corpus", [{"text": "no id"}], ["line 1", "no '_id'"]),
    "no text": ("queries", [QUERIES[0], {"_id": "q2", "title": "t"}],
                ["queries.jsonl", "line 2", "no 'text'"]),
    "tab in an id": ("queries", [{"_id": "q\t1", "text": "t"}], ["line 1", "a tab"]),
    "context not text": ("corpus", [{"_id": "c1", "text": "t", "context": 3}],
                         ["'context' should be a string"]),
    "unknown query": ("test", "query-id\tcorpus-id\tscore\nq9\tc1\t1\n",
                      ["test.tsv", "line 2", "query-id 'q9' is not in queries.jsonl"]),
    "unknown candidate": ("test", "query-id\tcorpus-id\tscore\nq1\tc9\t1\n",
                          ["line 2", "corpus-id 'c9' is not in corpus.jsonl"]),
    "spaces for tabs": ("test", "query-id\tcorpus-id\tscore\nq1 c1 1\n",
                        ["line 2", "1 tab-separated field", "separated by spaces?"]),
    "bad score": ("test", "query-id\tcorpus-id\tscore\nq1\tc1\thigh\n",
                  ["line 2", "score 'high' is not a number"]),
    "judged twice": ("test", "query-id\tcorpus-id\tscore\nq1\tc1\t1\nq1\tc1\t2\n",
                     ["line 3", "judged again (line 2 holds them)"]),
    "no header": ("test", "q1\tc1\t1\n", ["line 1", "is not the header", "query-id<TAB>"]),
    "empty qrels": ("test", "", ["whole file", "an empty file"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_names_the_file_the_line_and_the_fix(case, tmp_path):
    which, lines, words = BAD[case]
    files = {"corpus": lines} if which == "corpus" else {}
    folder = write_tiny_collection(tmp_path / "c", corpus=files.get("corpus"),
                                   queries=lines if which == "queries" else None,
                                   splits={"test": lines} if which == "test" else None)
    with pytest.raises(DataFormatError) as error:
        load_collection(folder, "test")
    message = str(error.value)
    assert "fix:" in message and "\n" not in message
    for word in words:
        assert word in message, (word, message)


def test_lenient_leaves_bad_lines_out_and_lists_each(tmp_path):
    corpus = [*CORPUS[:3], '{"_id": "c4", "text": ""}', CORPUS[4], "not json"]
    folder = write_tiny_collection(tmp_path / "c", corpus=corpus, splits={
        "test": TEST.replace("q4\tc4\t0\n", "q4\tc4\t1\nq2\tc9\t1\n")})
    with pytest.raises(DataFormatError, match="line 4"):
        load_collection(folder, "test")
    pool, notes = load_collection(folder, "test", strict=False)
    corpus_report, _, qrels_report = notes["skipped_records"]
    assert corpus_report["skipped"] == 2 and "line 6" in corpus_report["examples"][1]
    assert qrels_report["skipped"] == 2
    assert "corpus-id 'c4' was left out (corpus.jsonl line 4)" in qrels_report["examples"][0]
    assert "corpus-id 'c9' is not in corpus.jsonl" in qrels_report["examples"][1]
    assert [c.id for c in pool.candidates] == ["c1", "c2", "c3", "5"]
    assert pool.question_ids == ["q1", "q2", "q3"]  # q4 lost its only judgement


def test_a_pool_written_as_a_collection_reads_back_the_same(tmp_path):
    data = tmp_path / "data"
    write_json_gz(data / "squad" / "dev-v1.1.json.gz", TINY_SQUAD)
    pool, _ = load_pool("reqa_squad", "dev", data, use_cache=False)
    written = write_collection(pool, tmp_path / "out")
    assert (written["candidates"], written["questions"], written["judgements"]) == (5, 4, 5)
    assert (tmp_path / "out" / "qrels" / "dev.tsv").read_text().splitlines()[:2] == [
        "query-id\tcorpus-id\tscore", "q1\tp0s0\t1"]
    back, notes = load_pool(f"collection:{tmp_path / 'out'}", "dev")
    assert back.candidates == pool.candidates and back.questions == pool.questions
    assert back.gold == pool.gold and back.question_unit == "question_id"
    # "Where is Berlin?" is asked twice (q3, q4): one query, the first input's id, both copies
    assert back.question_ids == ["q1", "q2", "q3", "q5"] and back.gold[2] == [2, 3]
    assert notes["queries_not_in_split"] == 0
    from retrieval_qa.baselines.bm25 import BM25Scorer, BM25Settings
    from retrieval_qa.config import load_yaml
    from retrieval_qa.evaluation.evaluator import evaluate

    settings = BM25Settings.from_config(load_yaml("model/bm25.yaml"))
    ranks = [evaluate(p, BM25Scorer(p, settings, progress=False), top_k=0, memory_mb=1,
                      ks=(1,), doc_level=True, progress=False) for p in (pool, back)]
    assert torch.equal(ranks[0].ranks, ranks[1].ranks)
    assert torch.equal(ranks[0].doc_ranks, ranks[1].doc_ranks)
    again = write_collection(back, tmp_path / "again")  # an id pool keeps its ids
    assert again["query_ids"] == "the pool's question ids"
    assert (tmp_path / "again" / "queries.jsonl").read_bytes() == \
        (tmp_path / "out" / "queries.jsonl").read_bytes()


def test_a_collection_split_trains_with_a_validation_side_carved_out(tiny_collection):
    from retrieval_qa.data.split import train_val_split

    more = "".join(f"q{i}\tc{1 + i % 4}\t1\n" for i in range(6, 26))
    queries = QUERIES + [{"_id": f"q{i}", "text": f"question {i}?"} for i in range(6, 26)]
    folder = write_tiny_collection(tiny_collection, queries=queries,
                                   splits={"train": TRAIN + more})
    pool, _ = load_pool(f"collection:{folder}", "train")
    train, val = train_val_split(pool, 0.2, seed=0)
    assert val.pool == "train-val" and val.question_unit == "question_id"
    assert len(train) + len(val.pairs) == len(pool.pairs) == 22
    assert val.pairs and {p.question for p in train}.isdisjoint(val.questions)
    for qid, gold in zip(val.question_ids, val.gold, strict=True):  # gold per candidate
        assert {val.candidates[g].id for g in gold} == {p.answer_id for p in val.pairs
                                                        if p.question_id == qid}
