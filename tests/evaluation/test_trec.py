"""TREC runs and qrels (retrieval_qa/evaluation/trec.py): written from a run file in trec_eval's
order, read back with every line checked, and their metrics (MRR@k and R@k over the listed
top k, ties by descending docid) checked against trec_eval itself (pytrec-eval-terrier, the
`dev` extra) to 4 decimals; where no score ties, MRR@k equals the protocol's cut at k."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from retrieval_qa.data import Candidate, RetrievalPool
from retrieval_qa.errors import DataFormatError
from retrieval_qa.evaluation.evaluator import evaluate
from retrieval_qa.evaluation.search import DenseScorer
from retrieval_qa.evaluation.trec import (
    is_trec_run,
    read_qrels,
    read_run,
    trec_metrics,
    trec_order,
    trec_record,
    write_trec,
)


def _run_file(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


RECORDS = [  # a text-unit pool (no question_id): the qid is the row
    {"question": "q0", "gold_rank": 1.5, "gold_ids": ["b"], "top_ids": ["a", "b", "c"],
     "top_scores": [2.0, 2.0, 1.0]},
    {"question": "q1", "gold_rank": 2.0, "gold_ids": ["c", "d"], "top_ids": ["b", "c", "a"],
     "top_scores": [3.0, 1.0, 0.5]},
]


def test_the_run_is_written_in_trec_evals_order_with_ranks_1_to_k(tmp_path):
    out = write_trec(_run_file(tmp_path / "r.jsonl", RECORDS), tmp_path / "r.trec",
                     tmp_path / "q.qrels", tag="rqa bm25")
    assert (tmp_path / "r.trec").read_text().splitlines() == [
        "0 Q0 b 1 2.0 rqa_bm25", "0 Q0 a 2 2.0 rqa_bm25", "0 Q0 c 3 1.0 rqa_bm25",  # tie: b > a
        "1 Q0 b 1 3.0 rqa_bm25", "1 Q0 c 2 1.0 rqa_bm25", "1 Q0 a 3 0.5 rqa_bm25"]
    assert (tmp_path / "q.qrels").read_text().splitlines() == [
        "0 0 b 1", "1 0 c 1", "1 0 d 1"]
    assert (out["depth"], out["lines"], out["judgements"], out["questions"]) == (3, 6, 3, 2)
    assert out["scores_replaced_by_rank"] == 0 and is_trec_run(tmp_path / "r.trec")
    assert not is_trec_run(tmp_path / "r.jsonl")
    assert trec_order(["a", "b", "B"], [1.0, 1.0, 1.0]) == [1, 0, 2]  # byte order, descending


def test_a_list_whose_scores_break_its_order_keeps_the_order(tmp_path):
    tiers = [{"question_id": "x", "question": "q", "gold_rank": 1.0, "gold_ids": ["c"],
              "top_ids": ["c", "a", "b"], "top_scores": [-1.0, 5.0, 4.0]}]  # a reranked head
    out = write_trec(_run_file(tmp_path / "r.jsonl", tiers), tmp_path / "r.trec")
    assert (tmp_path / "r.trec").read_text().splitlines() == [
        "x Q0 c 1 3.0 rqa", "x Q0 a 2 2.0 rqa", "x Q0 b 3 1.0 rqa"]
    assert out["scores_replaced_by_rank"] == 1 and "qrels" not in out


def test_an_id_with_whitespace_cannot_be_written(tmp_path):
    bad = [{**RECORDS[0], "question_id": "what is"}]
    with pytest.raises(DataFormatError, match=r"record 1: question id 'what is' is empty or "
                                              "holds whitespace"):
        write_trec(_run_file(tmp_path / "r.jsonl", bad), tmp_path / "r.trec")
    assert not (tmp_path / "r.trec").exists()


@pytest.mark.parametrize("text,words", [
    ("q Q0 a 1 1.0\n", ["line 1", "5 fields"]),
    ("q Q0 a 1 1.0 t\nq Q0 b one 0.5 t\n", ["line 2", "rank 'one'"]),
    ("q Q0 a 1 nan t\n", ["score 'nan' is not a finite number"]),
    ("q Q0 a 1 1.0 t\n\nq Q0 a 2 0.5 t\n", ["line 3", "docid 'a' listed again", "line 1"]),
    ("", ["whole file", "empty"]),
])
def test_a_bad_run_line_is_named(tmp_path, text, words):
    (tmp_path / "r.trec").write_text(text)
    with pytest.raises(DataFormatError) as error:
        read_run(tmp_path / "r.trec")
    assert all(w in str(error.value) for w in words) and "fix:" in str(error.value)


def test_qrels_in_trec_or_beir_layout(tmp_path):
    (tmp_path / "t.qrels").write_text("q1 0 a 1\nq1 0 b 0\nq2 0 c 2\n")
    (tmp_path / "b.tsv").write_text("query-id\tcorpus-id\tscore\nq1\ta\t1\nq1\tb\t0\nq2\tc\t2\n")
    assert read_qrels(tmp_path / "t.qrels") == read_qrels(tmp_path / "b.tsv") == {
        "q1": {"a": 1.0, "b": 0.0}, "q2": {"c": 2.0}}
    (tmp_path / "bad.qrels").write_text("q1 0 a 1\nq1 0 a 1\n")
    with pytest.raises(DataFormatError, match="line 2: qid 'q1' and docid 'a' judged again"):
        read_qrels(tmp_path / "bad.qrels")
    (tmp_path / "short.qrels").write_text("q1 a 1\n")
    with pytest.raises(DataFormatError, match="line 1: 3 fields, a TREC qrels line has 4"):
        read_qrels(tmp_path / "short.qrels")


def test_questions_of_the_qrels_count_also_when_the_run_misses_them(tmp_path):
    (tmp_path / "r.trec").write_text("q1 Q0 a 1 2 t\nq1 Q0 b 2 1 t\nq3 Q0 a 1 1 t\n")
    (tmp_path / "q.qrels").write_text("q1 0 b 1\nq2 0 a 1\nq4 0 a 0\n")
    record = trec_record(tmp_path / "r.trec", tmp_path / "q.qrels", ks=(1, 5))
    assert record.ids == ["q1", "q2"] and record.ranks.tolist() == [2.0, math.inf]
    header = record.header
    assert (header["depth"], header["ks"], header["ks_beyond_depth"]) == (2, [1], [5])
    assert (header["questions_not_in_run"], header["run_questions_without_judgements"],
            header["judged_questions_without_relevant"]) == (1, 1, 1)
    assert trec_metrics(record) == {"mrr@2": 25.0, "r@1": 0.0, "p@1": 0.0}


def _random_run(rng: random.Random, questions: int, docs: int, depth: int):
    """A run with many tied scores (small integers), 1-3 relevant per question, some
    questions judged but not in the run."""
    run, qrels = {}, {}
    for q in range(questions):
        ids = rng.sample([f"d{i}" for i in range(docs)], depth)
        relevant = rng.sample(ids + ["d999"], rng.randint(1, 3))  # d999: never listed
        qrels[f"q{q}"] = {rng.choice(ids): 0, **{d: rng.choice([1, 2]) for d in relevant}}
        if q % 7 != 3:
            run[f"q{q}"] = {d: float(rng.randint(0, 5)) for d in ids}
    return run, qrels


def test_trec_metrics_agree_with_trec_eval_to_4_decimals(tmp_path):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    run, qrels = _random_run(random.Random(0), questions=60, docs=40, depth=20)
    (tmp_path / "r.trec").write_text("".join(
        f"{q} Q0 {d} {r} {s} t\n" for q, docs in run.items()
        for r, (d, s) in enumerate(docs.items(), 1)))  # rank column in another order than ours
    (tmp_path / "q.qrels").write_text("".join(f"{q} 0 {d} {rel}\n" for q, judged in qrels.items()
                                              for d, rel in judged.items()))
    ours = trec_metrics(trec_record(tmp_path / "r.trec", tmp_path / "q.qrels", ks=(1, 5, 10)))
    judged = {q: j for q, j in qrels.items() if any(r > 0 for r in j.values())}
    found = pytrec_eval.RelevanceEvaluator(judged, {"recip_rank", "success"}).evaluate(run)
    n = len(judged)  # trec_eval -c: a judged question absent from the run counts 0
    assert n > len(found)
    expected = {"mrr@20": 100 * sum(v["recip_rank"] for v in found.values()) / n,
                **{f"{m}@{k}": 100 * sum(v[f"success_{k}"] for v in found.values()) / n
                   for k in (1, 5, 10) for m in ("r", "p")}}
    assert ours.keys() == expected.keys()
    for key, value in expected.items():
        assert round(ours[key], 4) == round(value, 4), key


def test_without_ties_mrr_at_k_is_the_protocols_cut_at_k(tmp_path):
    torch.manual_seed(0)
    candidates = [Candidate(f"c{i}", f"s{i}", "", f"p{i // 3}") for i in range(30)]
    pool = RetrievalPool("toy", "test", candidates, [f"q{i}" for i in range(12)],
                         [[0], [12, 1], *[[j] for j in range(2, 12)]])
    scorer = DenseScorer(torch.randn(12, 8), torch.randn(30, 8))  # no tied scores
    result = evaluate(pool, scorer, top_k=5, memory_mb=1, ks=(1, 5), doc_level=False,
                      progress=False, run_file=tmp_path / "r.jsonl")
    write_trec(tmp_path / "r.jsonl", tmp_path / "r.trec", tmp_path / "q.qrels")
    trec = trec_metrics(trec_record(tmp_path / "r.trec", tmp_path / "q.qrels", ks=(1, 5)))
    ranks = result.ranks.numpy()
    cut = 100 * np.mean(np.where(ranks <= 5, 1 / ranks, 0.0))
    assert trec["mrr@5"] == pytest.approx(cut, abs=1e-9)
    assert trec["r@1"] == pytest.approx(result.metrics["r@1"], abs=1e-9)
    assert trec["r@5"] == pytest.approx(result.metrics["r@5"], abs=1e-9)
