"""SSE of Cross-VAEs Table 3: squared distances between different questions of one answer,
on the answers with more than 8 questions; mean per pair of l2-normalised embeddings."""

from __future__ import annotations

import math

import pytest
import torch

from retrieval_qa.data.subsets import one_to_many_subset
from retrieval_qa.data.types import Candidate, QAPair, RetrievalPool
from retrieval_qa.evaluation.sse import (
    PAPER_MIN_QUESTIONS,
    answer_groups,
    pool_answer_keys,
    pool_sse,
    question_sse,
    sse_stats,
)

# answer A: questions 0, 1, 2 (unit vectors (1,0), (0,1), (-1,0), given at other lengths)
# answer B: questions 3, 4 (too few for min_questions=3)
EMB = torch.tensor([[3.0, 0.0], [0.0, 0.5], [-2.0, 0.0], [1.0, 1.0], [1.0, -1.0]])
KEYS = ["A", "A", "A", "B", "B"]


def test_hand_example():
    # |q0 - q1|^2 = 2, |q0 - q2|^2 = 4, |q1 - q2|^2 = 2
    assert question_sse(EMB, KEYS, min_questions=3) == pytest.approx(8 / 3)
    assert question_sse(EMB, KEYS, min_questions=3, average="sum") == pytest.approx(8.0)
    assert question_sse(EMB, KEYS, min_questions=2) == pytest.approx((8 + 2) / 4)  # + B's pair
    raw = question_sse(EMB, KEYS, min_questions=3, normalize=False)
    # raw (3, 0), (0, .5), (-2, 0): 9 + .25, 25, 4 + .25
    assert raw == pytest.approx((9.25 + 25 + 4.25) / 3)
    stats = sse_stats(EMB, KEYS, min_questions=3)
    assert (stats.answers, stats.questions, stats.pairs) == (1, 3, 3)


def test_pair_and_answer_averages_and_shared_pairs_count_once():
    emb = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [1.0, 0.0]])
    # answer X: 0, 1, 2 (pairs 2, 4, 2); answer Y: 0, 3 (pair 0); question 0 has both
    keys = [("X", "Y"), "X", "X", "Y"]
    assert question_sse(emb, keys, min_questions=2) == pytest.approx(8 / 4)
    assert question_sse(emb, keys, min_questions=2, average="answer") == pytest.approx(
        (8 / 3 + 0) / 2)
    # questions 0 and 1 share two answers: their pair counts once
    shared = [("X", "Y"), ("X", "Y"), "X"]
    stats = sse_stats(emb[:3], shared, min_questions=2)
    assert stats.pairs == 3 and stats.value == pytest.approx(8 / 3)


def test_no_qualifying_answer_and_errors():
    assert math.isnan(question_sse(EMB, KEYS))  # default: more than 8 questions
    assert PAPER_MIN_QUESTIONS == 9
    with pytest.raises(ValueError, match="one answer key per question"):
        question_sse(EMB, KEYS[:4])
    with pytest.raises(ValueError, match="average"):
        question_sse(EMB, KEYS, average="median")
    with pytest.raises(ValueError, match="min_questions"):
        answer_groups(KEYS, 1)


def pool_with_a_shared_answer(n_shared: int) -> RetrievalPool:
    cands = [Candidate("c0", "Shared sentence.", "ctx", "d0"),
             Candidate("c1", "Other sentence.", "ctx", "d0"),
             Candidate("c2", "Shared sentence.", "ctx2", "d1")]  # a copy of c0's text
    questions = [f"q{i}?" for i in range(n_shared)] + ["lonely?"]
    gold = [[0, 2]] * n_shared + [[1]]
    pairs = [QAPair(q, "Shared sentence.", "ctx", q, "c0") for q in questions[:n_shared]]
    pairs.append(QAPair("lonely?", "Other sentence.", "ctx", "lonely?", "c1"))
    return RetrievalPool("toy", "dev", cands, questions, gold, pairs)


def test_pool_sse_uses_the_one_to_many_answers():
    pool = pool_with_a_shared_answer(9)
    assert pool_answer_keys(pool)[0] == frozenset({"Shared sentence."})
    torch.manual_seed(0)
    emb = torch.randn(len(pool.questions), 4)
    stats = pool_sse(emb, pool)
    subset = one_to_many_subset(pool, PAPER_MIN_QUESTIONS)
    assert stats.questions == len(subset.questions) == 9 and stats.answers == 1
    assert stats.pairs == 9 * 8 // 2
    unit = torch.nn.functional.normalize(emb[:9], dim=-1)
    expected = torch.pdist(unit).pow(2).mean().item()
    assert stats.value == pytest.approx(expected, rel=1e-6)
    assert math.isnan(pool_sse(emb[:9], pool_with_a_shared_answer(8)).value)
