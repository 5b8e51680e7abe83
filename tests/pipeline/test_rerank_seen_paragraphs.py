"""experiments/rerank_seen_paragraphs.py: validation questions split by whether a reranker
trained on their paragraph, each group's gain over the fused order, and the seen group's
excess gain with its interval; a split with one empty group refused."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import rerank_seen_paragraphs as S


def pool_of(contexts: list[str], gold: list[list[int]]):
    from retrieval_qa.data.types import Candidate, RetrievalPool

    cands = [Candidate(str(i), f"sentence {i}", ctx, ctx) for i, ctx in enumerate(contexts)]
    return RetrievalPool("toy", "train-val", cands, [f"q{i}?" for i in range(len(gold))], gold)


def test_a_question_is_seen_when_a_gold_sentence_sits_in_a_trained_paragraph():
    pool = pool_of(["p1", "p1", "p2", "p3"], [[0], [2], [2, 3], [3]])
    assert S.seen_mask(pool, {"p1", "p3"}).tolist() == [True, False, True, True]
    assert not S.seen_mask(pool, set()).any()


def test_gains_per_group_and_the_seen_groups_excess():
    seen = np.array([True, True, False, False])
    rr = {0.0: np.array([50.0, 50, 50, 100]),
          0.5: np.array([100.0, 100, 50, 100])}   # seen +50 each, unseen +0
    out = S.split_gains(rr, seen)
    assert out[0.0]["gain_seen"] == 0 and out[0.0]["excess_gain_seen"] == 0
    at = out[0.5]
    assert at["mrr"] == pytest.approx(87.5) and at["mrr_seen"] == 100 and at["mrr_unseen"] == 75
    assert (at["gain_seen"], at["gain_unseen"], at["excess_gain_seen"]) == (50, 0, 50)
    assert at["excess_gain_seen_ci95"] == [50, 50]   # no spread within either group
    rr[0.5] = np.array([100.0, 50, 50, 100])         # seen gains +50 and 0: SE 25
    low, high = S.split_gains(rr, seen)[0.5]["excess_gain_seen_ci95"]
    assert (low, high) == pytest.approx((25 - 1.96 * 25, 25 + 1.96 * 25), abs=0.01)


def test_a_split_with_an_empty_group_is_refused():
    rr = {0.0: np.array([50.0, 100])}
    for seen in ([True, True], [False, False]):
        with pytest.raises(ValueError, match="needs both groups"):
            S.split_gains(rr, np.array(seen))


def test_the_trained_paragraphs_are_those_of_the_drawn_questions_gold(monkeypatch):
    from retrieval_qa.distill import questions

    drawn = pool_of(["p1", "p1", "p2", "p3"], [[1], [2, 1]])
    monkeypatch.setattr(questions, "reranker_pool", lambda full, draw: drawn)
    assert S.training_paragraphs(None, {}) == {"p1", "p2"}


def test_training_settings_without_the_sample_are_refused(tmp_path):
    import json

    from retrieval_qa.distill.questions import reranker_draw
    from retrieval_qa.errors import InputFileError

    settings = {"dataset": "reqa_squad", "pool": "train", "val_fraction": 0.1, "split_seed": 0}
    (tmp_path / "training.json").write_text(json.dumps({"settings": settings}))
    with pytest.raises(InputFileError, match=r"its settings have no \['questions', 'seed'\]"):
        reranker_draw(tmp_path)
