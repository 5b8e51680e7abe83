"""The reranker's confidence gate (retrieval_qa/pipeline/gate.py) and its tuning."""

import numpy as np
import pytest

from retrieval_qa.pipeline.gate import confidences, gate_candidates, gated_weights
from retrieval_qa.pipeline.reranking import tune_rerank
from tests.pipeline.pools import tiny_pool


def test_copies_of_one_sentence_are_one_choice():
    pool = tiny_pool()
    paris = [i for i, c in enumerate(pool.candidates)
             if c.text == "Paris is the capital of France."]
    other = next(i for i in range(len(pool.candidates)) if i not in paris)
    fused = [(np.array([*paris, other]), np.array([3.0, 2.0, 1.0]))]
    sure = [(np.arange(3), np.array([5.0, 5.0, 0.0]))]
    assert confidences(pool, fused, sure)[0] == pytest.approx(1 / (1 + np.exp(-5.0)))
    lone = [(np.arange(1), np.array([-3.0]))]
    assert confidences(pool, [(fused[0][0][:1], fused[0][1][:1])], lone)[0] == 1.0


def test_a_gate_below_every_confidence_changes_nothing():
    conf = np.array([0.2, 0.9])
    assert gated_weights(conf, 0.6, None).tolist() == [0.6, 0.6]
    assert gated_weights(conf, 0.6, 0.1).tolist() == [0.6, 0.6]
    assert gated_weights(conf, 0.6, 0.5).tolist() == [0.0, 0.6]
    assert gate_candidates(np.array([]), [0.5]) == [0.0]


def _lists_and_reranker(pool):
    """Fused lists with the gold second for questions 0-2 and first for 3-4; a reranker that
    is sure and right on 0-2 and unsure and wrong on 3-4 (it prefers the fused first)."""
    gold_text = [{pool.candidates[c].text for c in g} for g in pool.gold]
    fused, wrong_text = [], {}
    for q, gold in enumerate(pool.gold):
        rest = [c for c in range(len(pool.candidates))
                if pool.candidates[c].text not in gold_text[q]]
        ids = [rest[0], gold[0], *rest[1:]] if q < 3 else [gold[0], rest[0], *rest[1:]]
        wrong_text[pool.questions[q]] = pool.candidates[rest[0]].text
        fused.append((np.array(ids), -np.arange(len(ids), dtype=float)))
    sure = {pool.questions[q]: gold_text[q] for q in range(3)}

    def score_pairs(questions, sentences):
        return [10.0 if s in sure.get(q, ()) else
                0.1 if q not in sure and s == wrong_text[q] else 0.0
                for q, s in zip(questions, sentences, strict=True)]
    return fused, score_pairs


def test_the_gate_is_tuned_on_validation_to_skip_the_unsure_questions():
    pool = tiny_pool()
    fused, score_pairs = _lists_and_reranker(pool)
    plain = tune_rerank(pool, fused, score_pairs, [4], "tune", 0.25, memory_mb=1)
    assert plain["gate"] is None and plain["val_mrr"] < 100  # no weight serves both kinds
    gated = tune_rerank(pool, fused, score_pairs, [4], "tune", 0.25, memory_mb=1,
                        gate="tune", gate_quantiles=[0.4])
    assert gated["gate"] > 0 and gated["val_mrr"] == 100.0
    assert gated["val_gated_share"] == 0.4           # questions 3 and 4 of 5
    table = gated["val_mrr_by_depth_gate_and_weight"][4]
    assert table[0.0] == gated["val_mrr_by_depth_and_weight"][4] == \
        plain["val_mrr_by_depth_and_weight"][4]       # gate 0: the ungated grid
