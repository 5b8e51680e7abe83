import math

import pytest
import torch

from retrieval_qa.evaluation import aggregate_min, gold_ranks, metrics_from_ranks


def _rank(scores, gold):
    s = torch.tensor([scores], dtype=torch.float32)
    mask = torch.zeros_like(s, dtype=torch.bool)
    mask[0, gold] = True
    return gold_ranks(s, mask).item()


def test_plain_rank_is_one_plus_number_of_higher_scores():
    assert _rank([3.0, 1.0, 3.0, 2.0], [1]) == 4.0
    assert _rank([0.1, 0.9, 0.5], [1]) == 1.0


def test_ties_share_the_average_rank():
    # scipy.stats.rankdata(-[5, 5, 5, 1]) = [2, 2, 2, 4]
    assert _rank([5.0, 5.0, 5.0, 1.0], [0]) == 2.0
    assert _rank([5.0, 5.0, 1.0], [1]) == 1.5
    assert _rank([9.0, 5.0, 5.0, 5.0, 5.0], [3]) == 3.5


def test_minimum_over_gold_copies():
    # rankdata(-[1, 9, 5, 9]) = [4, 1.5, 3, 1.5]; gold copies 0 and 2 -> min(4, 3)
    assert _rank([1.0, 9.0, 5.0, 9.0], [0, 2]) == 3.0
    assert _rank([1.0, 9.0, 5.0, 9.0], [0, 1]) == 1.5


def test_repeated_questions_keep_the_minimum():
    ranks = torch.tensor([3.0, 1.5, 7.0, 2.0], dtype=torch.float64)
    keys = torch.tensor([10, 4, 10, 4])
    assert aggregate_min(ranks, keys).tolist() == [1.5, 3.0]  # ordered by key


def test_gold_ranks_validates_input():
    with pytest.raises(ValueError, match="at least one gold"):
        gold_ranks(torch.zeros(1, 3), torch.zeros(1, 3, dtype=torch.bool))


def test_metrics_by_hand():
    m = metrics_from_ranks([1.0, 2.0, 4.5, 200.0], ks=(1, 5, 10))
    assert m["mrr"] == pytest.approx(100 * (1 + 0.5 + 1 / 4.5 + 1 / 200) / 4)
    assert m["mrr@100"] == pytest.approx(100 * (1 + 0.5 + 1 / 4.5) / 4)
    assert (m["r@1"], m["r@5"], m["r@10"]) == (25.0, 75.0, 75.0)
    assert m["p@5"] == m["r@5"]
    # a tie at 1.5 is not a hit at 1
    assert metrics_from_ranks([1.5], ks=(1,))["r@1"] == 0.0
    assert math.isclose(metrics_from_ranks([1.5], ks=(1,))["mrr"], 100 / 1.5)
    with pytest.raises(ValueError):
        metrics_from_ranks([0.0], ks=(1,))


def test_mrr_at_100_counts_rank_100_and_nothing_past_it():
    """The supervised-mining paper's MRR@100: 1/rank up to rank 100 inclusive, 0 past it (a tie
    spanning rank 100 averages past it and counts 0)."""
    ranks = torch.tensor([1.0, 100.0, 100.5, 101.0, 5000.0])
    m = metrics_from_ranks(ranks, ks=(1,))
    assert m["mrr@100"] == pytest.approx(100 * (1 + 1 / 100) / 5)
    assert m["mrr"] == pytest.approx(100 * (1 + 1 / 100 + 1 / 100.5 + 1 / 101 + 1 / 5000) / 5)
    assert metrics_from_ranks(ranks, ks=(1,), prefix="doc_")["doc_mrr@100"] == m["mrr@100"]
