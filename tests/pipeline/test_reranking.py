"""Reranking the fused lists (retrieval_qa/pipeline/reranking.py): placing the head, and the
depth, head weight and selection rule tuned on validation lists."""

import numpy as np
import pytest

from retrieval_qa.evaluation.metrics import metrics_from_ranks
from retrieval_qa.pipeline.fused_ranks import ordered, rank_lists
from retrieval_qa.pipeline.reranking import place, rerank, select_setting, tune_rerank
from retrieval_qa.pipeline.run import fuse
from retrieval_qa.pipeline.stages import run_retriever
from tests.pipeline.pools import tiny_pool
from tests.pipeline.test_run import _cfg


def _fused():
    """The tiny pool, its two BM25 stages' fused lists and its (question, gold text) pairs."""
    pool = tiny_pool()
    cfg = _cfg("convex", 4, weights={"bm25": 0.5, "ctx": 0.5})
    runs = [run_retriever(spec, pool, 4, ks=(1,), doc_level=False, memory_mb=1)
            for spec in cfg.retrievers]
    gold_text = {(q, pool.candidates[c].text) for q, g in zip(pool.questions, pool.gold,
                                                               strict=True) for c in g}
    return pool, fuse(cfg, runs, {"bm25": 0.5, "ctx": 0.5}), gold_text


def test_place_mixes_the_head_and_keeps_it_above_the_rest():
    fused = [(np.array([4, 7, 9, 2]), np.array([0.9, 0.8, 0.5, 0.1]))]
    heads = [(np.array([0, 1, 2]), np.array([-1.0, 3.0, 1.0]))]  # reranker: 7, 9, 4
    order = {}
    for w in (1.0, 0.0, 0.5):
        ids, scores, tiers = place(fused, heads, w)[0]
        order[w] = ids[ordered(ids, scores, tiers)].tolist()
        assert tiers.tolist() == [1, 1, 1, 0]
    assert order[1.0] == [7, 9, 4, 2]     # the reranker's order, raw logits
    assert order[0.0] == [4, 7, 9, 2]     # the fused order
    # 0.5: 4 -> 0.5*0 + 0.5*1 = 0.5, 7 -> 0.5*1 + 0.5*0.75 = 0.875, 9 -> 0.5*0.5 + 0 = 0.25
    assert order[0.5] == [7, 4, 9, 2]
    assert place(fused, heads, 1.0)[0][1][:3].tolist() == [-1.0, 3.0, 1.0]


def test_the_rerank_weight_is_tuned_on_the_validation_lists():
    pool, fused, gold_text = _fused()

    def oracle(questions, sentences):  # a perfect reranker: the question's gold first
        return [float(pair in gold_text) for pair in zip(questions, sentences, strict=True)]

    wrong = [(ids, -scores) for ids, scores in fused]  # a fused order upside down
    found = tune_rerank(pool, wrong, oracle, [4], "tune", 0.25, memory_mb=1)
    by_weight = found["val_mrr_by_depth_and_weight"][4]
    assert set(by_weight) == {0.0, 0.25, 0.5, 0.75, 1.0} and found["val_pairs_scored"] > 0
    assert found["weight"] >= 0.5 and found["val_mrr"] > by_weight[0.0] + 20

    def adversary(questions, sentences):  # gold last: the fused order (weight 0) wins
        return [-x for x in oracle(questions, sentences)]

    worst = tune_rerank(pool, fused, adversary, [4], "tune", 0.25, memory_mb=1)
    by_weight = worst["val_mrr_by_depth_and_weight"][4]
    assert worst["weight"] == 0.0 and worst["val_mrr"] > by_weight[1.0]


def test_the_rerank_depth_is_tuned_on_the_validation_lists_from_one_scoring():
    pool, fused, gold_text = _fused()
    wrong = [(ids, -scores) for ids, scores in fused]
    pairs = []

    def oracle(questions, sentences):  # the gold first; counts the pairs it scores
        pairs.extend(zip(questions, sentences, strict=True))
        return [float(pair in gold_text) for pair in zip(questions, sentences, strict=True)]

    found = tune_rerank(pool, wrong, oracle, [1, 2, 4], 1.0, 0.25, memory_mb=1)
    assert len(pairs) == found["val_pairs_scored"]  # scored once, at the deepest
    by_depth = {k: v[1.0] for k, v in found["val_mrr_by_depth_and_weight"].items()}
    assert set(by_depth) == {1, 2, 4} and found["weight"] == 1.0
    assert found["val_mrr"] == max(by_depth.values())
    assert found["top_k"] == min(k for k, m in by_depth.items() if m == found["val_mrr"])
    for k, mrr in by_depth.items():  # each depth's MRR is that of reranking at that depth
        ranks, _ = rank_lists(pool, rerank(pool, wrong, oracle, k, 1.0)[0], doc_level=False,
                              memory_mb=1)
        assert mrr == round(float(metrics_from_ranks(ranks, (1,))["mrr"]), 4)
    assert by_depth[4] > by_depth[1]  # the upside-down list hides gold below the top 1


def test_reranking_shows_a_bar_over_the_questions_and_the_same_lists(capsys):
    pool, fused, _ = _fused()

    def by_length(questions, sentences):
        return [float(len(s)) for s in sentences]

    quiet, _ = rerank(pool, fused, by_length, 2, 0.5)
    assert "rerank top-2" not in capsys.readouterr().err
    shown, _ = rerank(pool, fused, by_length, 2, 0.5, progress=True)
    assert f"rerank top-2 ({pool.pool})" in capsys.readouterr().err
    for (ids_a, scores_a, tiers_a), (ids_b, scores_b, tiers_b) in zip(quiet, shown,
                                                                        strict=True):
        assert list(ids_a) == list(ids_b) and list(tiers_a) == list(tiers_b)
        assert list(scores_a) == list(scores_b)  # the same arithmetic, bar or not


def _rr(rng, base, shift):
    """Reciprocal ranks (%) whose mean is exactly ``base``'s plus ``shift``: noise of mean 0
    and standard deviation 5 on each question."""
    z = rng.normal(0, 1, len(base))
    return base + shift + 5 * (z - z.mean()) / z.std()


def test_least_reliance_takes_the_least_weight_the_validation_side_cannot_tell_from_the_best():
    rng = np.random.default_rng(0)
    base = rng.uniform(20, 80, 400)  # a paired difference's standard error: about 0.35
    rr = {(10, 0.0, 0.5): _rr(rng, base, 2.0), (10, 0.0, 0.4): _rr(rng, base, 1.9),
          (10, 0.0, 0.3): _rr(rng, base, 1.8), (10, 0.0, 0.1): _rr(rng, base, -3.0),
          (20, 0.0, 0.3): _rr(rng, base, 1.85)}
    best = select_setting(rr)
    assert best == {"setting": (10, 0.0, 0.5)}
    safe = select_setting(rr, "least_reliance", 1.0)
    # 0.1 is 5 points (about 14 standard errors) below; of the rest, all within one standard
    # error of the best, the least weight, then the shallower depth
    assert safe["setting"] == (10, 0.0, 0.3)
    assert safe["best"]["weight"] == 0.5 and safe["val_settings_within_se"] == 4
    assert 0 < safe["val_gap_to_best"] <= safe["val_gap_se"]
    strict = select_setting(rr, "least_reliance", 0.0)  # nothing below the best counts
    assert strict["setting"] == (10, 0.0, 0.5) and strict["val_gap_to_best"] == 0
    wide = select_setting(rr, "least_reliance", 100.0)  # everything counts: the least weight
    assert wide["setting"] == (10, 0.0, 0.1)


def test_least_reliance_prefers_the_higher_gate_among_equals_and_rejects_an_unknown_rule():
    same = np.full(5, 50.0)
    rr = {(10, 0.0, 0.5): same, (10, 0.4, 0.5): same, (5, 0.0, 0.5): same}
    assert select_setting(rr)["setting"] == (5, 0.0, 0.5)  # best: the shallowest depth
    assert select_setting(rr, "least_reliance")["setting"] == (5, 0.0, 0.5)
    del rr[5, 0.0, 0.5]
    assert select_setting(rr)["setting"] == (10, 0.0, 0.5)  # best: the lowest gate
    assert select_setting(rr, "least_reliance")["setting"] == (10, 0.4, 0.5)
    with pytest.raises(ValueError, match="select='safest' is not one of"):
        select_setting(rr, "safest")


def test_tune_rerank_reports_the_best_beside_the_least_reliant_choice():
    pool, fused, gold_text = _fused()
    wrong = [(ids, -scores) for ids, scores in fused]

    def oracle(questions, sentences):
        return [float(pair in gold_text) for pair in zip(questions, sentences, strict=True)]

    best = tune_rerank(pool, wrong, oracle, [4], "tune", 0.25, memory_mb=1)
    safe = tune_rerank(pool, wrong, oracle, [4], "tune", 0.25, memory_mb=1,
                       select="least_reliance", select_se=1.0)
    by_weight = safe["val_mrr_by_depth_and_weight"][4]
    assert best["select"] == "best" and safe["select"] == "least_reliance"
    assert safe["best"] == {"top_k": 4, "weight": best["weight"], "gate": None,
                            "val_mrr": best["val_mrr"]}
    assert safe["weight"] <= best["weight"] and safe["val_mrr"] == by_weight[safe["weight"]]
    # every weight below the chosen one is more than a standard error below the best
    assert all(by_weight[w] < best["val_mrr"] for w in by_weight if w < safe["weight"])
