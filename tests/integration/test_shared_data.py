"""Counts and BM25 on the real files under ../shared/data (skipped when absent)."""

import pytest
from helpers import eval_conf

from retrieval_qa.baselines.bm25 import BM25Scorer, BM25Settings
from retrieval_qa.config import load_yaml
from retrieval_qa.data import load_pool
from retrieval_qa.data.stats import pool_stats
from retrieval_qa.evaluation import evaluate, metrics_from_run_file

pytestmark = pytest.mark.integration


def test_reqa_squad_dev_matches_the_reference_counts(shared_data):
    pool, notes = load_pool("reqa_squad", "dev", data_dir=shared_data)
    stats = pool_stats(pool)
    assert (stats["candidates"], stats["qa_inputs"], stats["questions"]) == (10_250, 11_426, 10_539)
    assert notes["answers_outside_sentences"] == 0
    assert stats["documents"] == 2067
    assert (stats["whole_context_candidates"], stats["questions_with_a_whole_context_gold"]) == (51, 248)


def test_reqa_squad_train_pool(shared_data):
    pool, _ = load_pool("reqa_squad", "train", data_dir=shared_data)
    stats = pool_stats(pool)
    assert (stats["qa_inputs"], stats["questions"]) == (87_599, 87_355)
    # the ENDX paper's Table 1 reports 58,934 answer sentences for train; this rebuilt train
    # file takes most answer_start values from the answer's first occurrence, which moves
    # some answers to another sentence (58,163 here), so only closeness can be asked
    assert abs(stats["answer_sentences"] - 58_934) / 58_934 < 0.02
    assert len(pool.candidates) == 91_707  # the reference splitter's train pool


@pytest.mark.parametrize("dataset, candidates", [("multireqa_squad", 10_642),
                                                 ("multireqa_relationextraction", 3_301)])
def test_multireqa_candidate_counts(shared_data, dataset, candidates):
    pool, notes = load_pool(dataset, "test", data_dir=shared_data)
    assert len(pool.candidates) == candidates
    assert notes["skipped_boundaries"]["skipped"] == 0
    assert all(pool.gold)


def test_bm25_dev_run_file_reproduces_metrics(shared_data, tmp_path):
    pool, _ = load_pool("reqa_squad", "dev", data_dir=shared_data)
    settings = BM25Settings.from_config(load_yaml("model/bm25.yaml"))
    run = tmp_path / "bm25.jsonl"
    result = evaluate(pool, BM25Scorer(pool, settings), run_file=run, progress=False, **eval_conf())
    assert metrics_from_run_file(run, eval_conf()["ks"]) == pytest.approx(result.metrics)
    # sanity band for BM25 on the dev pool (see paper-targets.md: about 69 to 77 MRR)
    assert 60 < result.metrics["mrr"] < 85


def test_multireqa_squad_counts_one_question_per_qid(shared_data):
    """The supervised-mining paper's Table 1: 10,485 questions in MultiReQA SQuAD test
    (10,507 qids, 22 whose answer crosses a sentence boundary), over 10,456 strings."""
    pool, notes = load_pool("multireqa_squad", "test", data_dir=shared_data)
    stats = pool_stats(pool)
    assert stats["question_unit"] == "mrqa_qid" and stats["questions"] == 10_485
    assert stats["distinct_question_strings"] == 10_456
    assert (notes["question_ids"], notes["questions_without_gold"]) == (10_507, 22)


@pytest.mark.slow
def test_bm25_sparse_path_equals_full_rows_on_dev(shared_data):
    import torch

    pool, _ = load_pool("reqa_squad", "dev", data_dir=shared_data)
    scorer = BM25Scorer(pool, BM25Settings.from_config(load_yaml("model/bm25.yaml")))
    fast = evaluate(pool, scorer, progress=False, **eval_conf())
    full = evaluate(pool, scorer, sparse=False, progress=False, **eval_conf())
    # exact: both paths make each score by the same float32 additions in the same order
    assert torch.equal(fast.ranks, full.ranks) and torch.equal(fast.doc_ranks, full.doc_ranks)
    assert fast.metrics == full.metrics


def test_relationextraction_sentences_are_mostly_their_whole_paragraph(shared_data):
    """2,676 of RelationExtraction's 3,301 candidates are their paragraph's only sentence, so a
    model that reads the paragraph beside the sentence sees nothing more for them."""
    pool, _ = load_pool("multireqa_relationextraction", "test", data_dir=shared_data)
    stats = pool_stats(pool)
    assert (stats["documents"], stats["whole_context_candidates"]) == (2_948, 2_676)
    assert stats["candidates_per_context"]["histogram"]["1"] == 2_676
    assert stats["questions_with_a_whole_context_gold"] == 2_676  # of 2,945
