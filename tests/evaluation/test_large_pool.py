"""Column chunks (retrieval_qa/evaluation/large_pool.py): a pool too large for enough rows of
every candidate gives the same gold ranks, document ranks and top-k lists as the unchunked
path, ties included; top-k lists are in one total order (score, then candidate index)."""

from __future__ import annotations

import pytest
import torch

from retrieval_qa.evaluation.evaluator import rank_questions
from retrieval_qa.evaluation.large_pool import merge_top_k, stable_top_k
from retrieval_qa.evaluation.search import DenseScorer, fitting_rows


def _pool(n_q: int, n_c: int, dim: int, ties: bool, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    if ties:  # small integers: exact products, many equal scores
        q = torch.randint(-2, 3, (n_q, dim), generator=g).float()
        c = torch.randint(-2, 3, (n_c, dim), generator=g).float()
    else:
        q, c = torch.randn(n_q, dim, generator=g), torch.randn(n_c, dim, generator=g)
    counts = torch.randint(1, 4, (n_q,), generator=g).tolist()
    gold = [torch.randperm(n_c, generator=g)[:n].tolist() for n in counts]
    doc_of = torch.arange(n_c) // 5  # paragraphs of five sentences
    return DenseScorer(q, c), gold, doc_of


def _rank(scorer, gold, doc_of, memory_mb: float, min_block_rows: int, k: int = 20):
    tops = []
    ranks, doc_ranks = rank_questions(
        scorer, gold, doc_of, memory_mb=memory_mb, top_k=k, min_block_rows=min_block_rows,
        on_block=lambda rows, r, d, top: tops.extend(top))
    return ranks, doc_ranks, tops


@pytest.mark.parametrize("ties", [True, False], ids=["integer-ties", "gaussian"])
def test_column_chunks_give_the_unchunked_ranks_and_top_k(ties):
    scorer, gold, doc_of = _pool(40, 3000, 8 if ties else 32, ties)
    want = _rank(scorer, gold, doc_of, memory_mb=64, min_block_rows=1)
    assert fitting_rows(3000, 0.05) < 8  # 0.05 MiB: the blocks below go in column chunks
    got = _rank(scorer, gold, doc_of, memory_mb=0.05, min_block_rows=8)
    assert torch.equal(want[0], got[0]) and torch.equal(want[1], got[1])
    if ties:
        assert (want[0] % 1 == 0.5).any()  # ties with the gold, x.5 ranks
    assert len(want[2]) == len(got[2]) == 40
    for (ids_a, scores_a), (ids_b, scores_b) in zip(want[2], got[2], strict=True):
        assert ids_a.tolist() == ids_b.tolist()
        assert torch.allclose(torch.from_numpy(scores_a), torch.from_numpy(scores_b),
                              atol=1e-5)


def test_a_block_of_one_question_row_also_goes_in_chunks():
    """The literal case: a single row of scores is over the budget (min_block_rows=1)."""
    scorer, gold, doc_of = _pool(6, 5000, 8, ties=True, seed=3)
    assert fitting_rows(5000, 0.01) == 0
    want = _rank(scorer, gold, doc_of, memory_mb=64, min_block_rows=1)
    got = _rank(scorer, gold, doc_of, memory_mb=0.01, min_block_rows=1)
    assert torch.equal(want[0], got[0]) and torch.equal(want[1], got[1])
    assert [a.tolist() for a, _ in want[2]] == [b.tolist() for b, _ in got[2]]


def test_top_k_is_by_score_then_candidate_index():
    g = torch.Generator().manual_seed(1)
    scores = torch.randint(0, 4, (30, 50), generator=g).float()
    values, indices = stable_top_k(scores, 12)
    for row in range(30):
        want = sorted(range(50), key=lambda c: (-scores[row, c].item(), c))[:12]
        assert indices[row].tolist() == want
        assert values[row].tolist() == [scores[row, c].item() for c in want]
    left = stable_top_k(scores[:, :20], 12)
    right = stable_top_k(scores[:, 20:], 12, offset=20)
    merged = merge_top_k(left, right, 12)
    assert torch.equal(merged[1], indices) and torch.equal(merged[0], values)


def test_a_non_finite_score_in_a_chunk_names_the_question_and_candidate():
    scorer, gold, _ = _pool(4, 2000, 8, ties=True)
    scorer.candidates[1234, 0] = float("nan")
    with pytest.raises(ValueError, match="question 0 at candidate 1234"):
        rank_questions(scorer, gold, memory_mb=0.01, min_block_rows=2)
