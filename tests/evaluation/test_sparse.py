import numpy as np
import pytest
import torch
from helpers import eval_conf

from retrieval_qa.evaluation import sparse
from retrieval_qa.evaluation.ranking import gold_ranks
from retrieval_qa.evaluation.sparse import SparseScores


def _block(n=40, n_c=30, n_docs=7, seed=0):
    """Random blocks with many exact ties, bases above, equal to and below listed scores."""
    rng = np.random.default_rng(seed)
    rows, cols = [], []
    for r in range(n):
        listed = rng.choice(n_c, size=int(rng.integers(0, n_c + 1)), replace=False)
        rows += [r] * len(listed)
        cols += listed.tolist()
    rows, cols = np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)
    order = rng.permutation(len(rows))  # listed entries need not be grouped by row
    values = rng.integers(-2, 4, len(rows)).astype(np.float32)
    base = rng.integers(-1, 2, n).astype(np.float32)
    block = SparseScores.from_entries(rows[order], cols[order], values[order], base, n_c)
    gold = [sorted(set(rng.integers(0, n_c, int(rng.integers(1, 4))).tolist()))
            for _ in range(n)]
    doc_of = rng.integers(0, n_docs, n_c)
    doc_of[:n_docs] = np.arange(n_docs)  # every document has a sentence
    return block, gold, doc_of


def _dense_doc_ranks(dense, doc_of, gold):
    n_docs = int(doc_of.max()) + 1
    docs = torch.full((len(dense), n_docs), float("-inf"))
    docs.scatter_reduce_(1, torch.from_numpy(doc_of).expand(len(dense), -1), dense, "amax")
    mask = torch.zeros(len(dense), n_docs, dtype=torch.bool)
    for r, g in enumerate(gold):
        mask[r, sorted({int(doc_of[c]) for c in g})] = True
    return gold_ranks(docs, mask)


@pytest.mark.parametrize("seed", range(8))
def test_sparse_ranks_equal_dense_rules(seed):
    block, gold, doc_of = _block(seed=seed)
    dense = torch.from_numpy(block.dense())
    mask = torch.zeros(dense.shape, dtype=torch.bool)
    for r, g in enumerate(gold):
        mask[r, g] = True
    row_of = block.row_of()
    best = sparse.best_gold_scores(block, gold)
    # exact: small integer scores, no rounding on either path
    assert np.array_equal(sparse.gold_ranks(block, best, row_of),
                          gold_ranks(dense, mask).numpy())
    doc_gold = [sorted({int(doc_of[c]) for c in g}) for g in gold]
    doc_sizes = np.bincount(doc_of)
    assert np.array_equal(sparse.doc_ranks(block, best, row_of, doc_of, doc_sizes, doc_gold),
                          _dense_doc_ranks(dense, doc_of, gold).numpy())


@pytest.mark.parametrize("k", [1, 5, 30, 50])
def test_sparse_top_k_orders_by_score_then_index(k):
    block, _, _ = _block(seed=3)
    dense = block.dense()
    for r, (ids, scores) in enumerate(sparse.top_k(block, k)):
        want = sorted(range(block.num_candidates), key=lambda c: (-dense[r, c], c))[:k]
        assert ids.tolist() == want
        assert scores.tolist() == dense[r, want].tolist()


def test_non_finite_entries_are_found():
    block = SparseScores.from_entries(np.array([0, 1]), np.array([2, 0]),
                                      np.array([1.0, np.nan], dtype=np.float32),
                                      np.zeros(2, dtype=np.float32), 3)
    assert block.first_non_finite()[:2] == (1, 0)
    block.base[0] = np.inf
    assert block.first_non_finite()[:2] == (0, None)


def test_evaluator_names_the_question_of_a_non_finite_sparse_score(tmp_path):
    from retrieval_qa.data.types import Candidate, RetrievalPool
    from retrieval_qa.evaluation import evaluate

    cands = [Candidate(f"c{i}", "t", "ctx", "d") for i in range(4)]
    pool = RetrievalPool("toy", "dev", cands, ["a?", "b?", "c?"], [[0], [1], [2]])

    class NaNScorer:
        num_questions, num_candidates = 3, 4

        def score_sparse(self, rows):
            n = len(rows)
            values = np.ones(n, dtype=np.float32)
            if 1 in rows:
                values[rows.index(1)] = np.nan
            return SparseScores.from_entries(np.arange(n), np.full(n, 3), values,
                                             np.zeros(n, dtype=np.float32), 4)

    run = tmp_path / "run.jsonl"
    with pytest.raises(ValueError, match=r"non-finite score nan for question 1 'b\?' at "
                                         r"candidate 'c3'"):
        evaluate(pool, NaNScorer(), run_file=run, progress=False, **eval_conf())
    assert not list(tmp_path.iterdir())
