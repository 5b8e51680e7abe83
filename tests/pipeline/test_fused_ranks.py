"""The pipeline's rank rule beyond the lists against the full-ranking evaluator."""

import numpy as np
import pytest
import torch

from retrieval_qa.evaluation.evaluator import doc_index, rank_questions
from retrieval_qa.evaluation.ranking import gold_ranks
from retrieval_qa.pipeline.fused_ranks import levels, rank_lists
from retrieval_qa.pipeline.fusion import convex
from retrieval_qa.pipeline.tuning import grid_mrr
from tests.pipeline.pools import tiny_pool


class MatrixScorer:
    def __init__(self, scores: torch.Tensor):
        self.scores = scores
        self.num_questions, self.num_candidates = scores.shape

    def score(self, rows):
        return self.scores[rows.start:rows.stop]


def _top(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    ids = np.lexsort((np.arange(len(scores)), -scores))[:k]
    return ids, scores[ids]


def _mask(pool):
    m = torch.zeros(len(pool.questions), len(pool.candidates), dtype=torch.bool)
    for q, g in enumerate(pool.gold):
        m[q, g] = True
    return m


def test_levels_keep_order_and_ties():
    assert levels(np.array([0.5, 2.0, 0.5, -1.0])).tolist() == [2, 3, 2, 1]
    assert levels(np.array([9.0, 1.0, 1.0]), np.array([0, 1, 0])).tolist() == [2, 3, 1]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_unretrieved_candidates_rank_as_minus_inf_in_the_full_ranking(seed):
    pool = tiny_pool()
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 4, size=(len(pool.questions), len(pool.candidates))).astype(float)
    for k in range(1, len(pool.candidates) + 1):
        lists = [_top(row, k) for row in scores]
        got, _ = rank_lists(pool, lists, doc_level=False, memory_mb=512)
        cut = torch.full(scores.shape, float("-inf"), dtype=torch.float64)
        for q, (ids, vals) in enumerate(lists):
            cut[q, torch.from_numpy(ids)] = torch.from_numpy(vals)
        want = gold_ranks(cut, _mask(pool))
        assert got.tolist() == want.tolist(), k


def test_lists_of_the_whole_pool_give_the_full_rankings_ranks_and_doc_ranks():
    pool = tiny_pool()
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 3, size=(len(pool.questions), len(pool.candidates))).astype(float)
    lists = [_top(row, len(pool.candidates)) for row in scores]
    got, got_doc = rank_lists(pool, lists, doc_level=True, memory_mb=512)
    want, want_doc = rank_questions(MatrixScorer(torch.from_numpy(scores).float()), pool.gold,
                                    doc_index(pool)[0], sparse=False, memory_mb=512)
    assert got.tolist() == want.tolist() and got_doc.tolist() == want_doc.tolist()


def test_tuning_mrr_is_the_rankings_mrr():
    pool = tiny_pool()
    rng = np.random.default_rng(4)
    per_question = [[_top(rng.normal(size=len(pool.candidates)), 4),
                     _top(rng.integers(0, 3, len(pool.candidates)).astype(float), 3)]
                    for _ in pool.questions]
    weights = np.array([[0.3, 0.7], [1.0, 0.0], [0.5, 0.5]])
    tuned = grid_mrr(per_question, pool.gold, len(pool.candidates), "convex", weights)
    for w, mrr in zip(weights, tuned, strict=True):
        # float64 sums of two terms (a matrix product in the grid, a vector one here): only
        # equal inputs tie, in both; random normal scores leave no near-tie to swap
        ranks, _ = rank_lists(pool, [convex(lists, w) for lists in per_question],
                              doc_level=False, memory_mb=512)
        assert mrr == pytest.approx(100 * np.mean(1 / ranks), abs=1e-9)
