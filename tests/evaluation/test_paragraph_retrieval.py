import pytest
import torch
from sklearn.metrics import average_precision_score

from retrieval_qa.evaluation.paragraph_retrieval import (
    average_precision,
    evaluate_paragraphs,
    evaluate_questions_from_paragraphs,
    first_question_ranks,
    paragraph_ranks,
    plot_pr_curves,
    precision_recall_points,
    question_ranks,
    recall_at_k,
)


def test_ranks_and_recall_by_hand():
    p = torch.eye(3)
    q = torch.tensor([[1.0, 0.0, 0.0], [0.9, 0.5, 0.0], [0.5, 0.5, 0.0]])
    ranks = paragraph_ranks(q, p, [0, 1, 1], block=2)
    assert ranks.tolist() == [1.0, 2.0, 1.5]       # tie between paragraphs 0 and 1: 1.5
    r = recall_at_k(ranks, ks=(1, 2))
    assert r["hits@1"] == 1 and r["r@1"] == pytest.approx(33.33)
    assert r["hits@2"] == 3 and r["avg_recall"] == pytest.approx((33.33 + 100) / 2, abs=0.01)


def test_ap_matches_sklearn_and_curve_is_plotted(tmp_path):
    g = torch.Generator().manual_seed(0)
    q, p = torch.randn(20, 4, generator=g), torch.randn(6, 4, generator=g)
    gold = torch.randint(0, 6, (20,), generator=g)
    target = torch.zeros(20, 6)
    target[torch.arange(20), gold] = 1
    expected = average_precision_score(target.flatten().numpy(), (q @ p.T).flatten().numpy())
    assert average_precision(q, p, gold) == pytest.approx(expected, abs=1e-5)
    precision, recall = precision_recall_points(q, p, gold, points=50)
    assert len(precision) == len(recall) <= 50
    out = plot_pr_curves({"x": (precision, recall, expected)}, tmp_path / "pr.png")
    assert out.stat().st_size > 1000
    assert evaluate_paragraphs(q, p, gold)["ap"] == pytest.approx(expected, abs=1e-4)


def test_too_many_pairs_is_an_error_with_the_fix():
    with pytest.raises(ValueError, match="dev pool"):
        average_precision(torch.zeros(5, 2), torch.zeros(5, 2), [0] * 5, max_pairs=10)


def test_questions_from_paragraphs_by_hand():
    # paragraph 0 has questions 0, 1; paragraph 1 has questions 2, 3
    q = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0], [0.8, 0.6]])
    p = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    gold = [0, 0, 1, 1]
    # p0 scores q: 1, .6, 0, .8 -> q0 rank 1, q1 rank 3; p1 scores: 0, .8, 1, .6 -> q2 1, q3 3
    assert question_ranks(q, p, gold).tolist() == [1.0, 3.0, 1.0, 3.0]
    assert first_question_ranks(q, p, gold).tolist() == [1.0, 1.0]
    out = evaluate_questions_from_paragraphs(q, p, gold, ks=(1, 2, 3))
    assert out["pairs"] == 4 and out["r@1"] == 50.0 and out["r@3"] == 100.0
    assert out["any"]["paragraphs"] == 2 and out["any"]["r@1"] == 100.0
    # brute force on random vectors: the pair's question against every question, ties averaged
    g = torch.Generator().manual_seed(0)
    q, p = torch.randn(30, 4, generator=g), torch.randn(6, 4, generator=g)
    gold = torch.randint(0, 6, (30,), generator=g)
    ref = []
    for i in range(30):
        s = q @ p[gold[i]]
        ref.append(float((s > s[i]).sum() + 1))
    # exact although the reference is another product (one paragraph at a time): the two
    # closest scores of any paragraph are 1.3e-3 apart, no rounding can swap them
    assert (q @ p.T).sort(dim=0).values.diff(dim=0).min() > 1e-4
    assert question_ranks(q, p, gold, block=7).tolist() == ref
    best = {j: min(r for r, gi in zip(ref, gold.tolist(), strict=True)
                   if gi == j) for j in set(gold.tolist())}
    assert first_question_ranks(q, p, gold, block=2).tolist() == [best[j] for j in sorted(best)]
