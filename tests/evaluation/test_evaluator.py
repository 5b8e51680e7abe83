import numpy as np
import pytest
import torch
from helpers import eval_conf

from retrieval_qa.data.types import Candidate, RetrievalPool
from retrieval_qa.evaluation import DenseScorer, evaluate, metrics_from_run_file, read_run_file
from retrieval_qa.evaluation.evaluator import search_settings
from retrieval_qa.evaluation.search import rows_per_block


def _random_pool(n_q=37, n_c=53, n_docs=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    cands = [Candidate(f"c{i}", f"t{i}", f"doc{i % n_docs}", f"d{i % n_docs}") for i in range(n_c)]
    gold = [sorted(set(torch.randint(0, n_c, (int(torch.randint(1, 4, (1,), generator=g)),),
                                     generator=g).tolist())) for _ in range(n_q)]
    pool = RetrievalPool("toy", "dev", cands, [f"q{i}" for i in range(n_q)], gold)
    # integer-valued embeddings give many exact ties
    q = torch.randint(-2, 3, (n_q, 4), generator=g).float()
    c = torch.randint(-2, 3, (n_c, 4), generator=g).float()
    return pool, q, c


def _reference_ranks(scores, gold):
    """Slow reference: scipy-style average ranks of -scores, minimum over gold."""
    out = []
    for row, g in zip(scores.tolist(), gold, strict=True):
        arr = -np.asarray(row)
        ranks = np.empty(len(arr))
        for i, v in enumerate(arr):
            ranks[i] = (arr < v).sum() + ((arr == v).sum() + 1) / 2
        out.append(min(ranks[j] for j in g))
    return out


def test_blocked_search_equals_reference_and_run_file_reproduces(tmp_path):
    pool, q, c = _random_pool()
    run = tmp_path / "run.jsonl"
    # 0.001 MB forces one question per block: many blocks, same answer
    result = evaluate(pool, DenseScorer(q, c), run_file=run, progress=False,
                      **eval_conf(memory_mb=0.001, top_k=5))
    assert result.ranks.tolist() == _reference_ranks(q @ c.T, pool.gold)
    assert metrics_from_run_file(run, eval_conf()["ks"]) == pytest.approx(result.metrics)
    lines = read_run_file(run)
    assert len(lines) == 37 and len(lines[0]["top_ids"]) == 5
    assert lines[0]["gold_ids"] == [pool.candidates[i].id for i in pool.gold[0]]
    assert lines[0]["top_scores"] == sorted(lines[0]["top_scores"], reverse=True)
    big = evaluate(pool, DenseScorer(q, c), progress=False, **eval_conf(memory_mb=512))
    assert big.metrics == result.metrics  # exact: integer-valued scores, in any block shape


def test_document_level_ranks_paragraphs_by_best_sentence():
    cands = [Candidate("a", "a", "P", "P"), Candidate("b", "b", "P", "P"),
             Candidate("c", "c", "Q", "Q"), Candidate("d", "d", "R", "R")]
    pool = RetrievalPool("toy", "dev", cands, ["q"], [[1]])
    scores = torch.tensor([[0.9, 0.1, 0.5, 0.7]])
    q, c = scores, torch.eye(4)
    result = evaluate(pool, DenseScorer(q, c), progress=False, **eval_conf())
    assert result.ranks.tolist() == [4.0]
    assert result.doc_ranks.tolist() == [1.0]  # paragraph P holds the best sentence (0.9)


def test_rows_per_block_bounds_memory():
    # 87k x 91k would be ~32 GB as one float32 matrix; blocks stay within the budget
    rows = rows_per_block(91_000, memory_mb=512)
    assert rows * 91_000 * 16 <= 512 * 2**20 and rows >= 1


def test_mismatched_scorer_is_rejected():
    pool, q, c = _random_pool()
    with pytest.raises(ValueError, match="scorer covers"):
        evaluate(pool, DenseScorer(q[:3], c), progress=False, **eval_conf())


def test_non_finite_score_is_an_error_naming_the_question(tmp_path):
    pool, q, c = _random_pool()
    q[5, 0] = float("nan")
    run = tmp_path / "run.jsonl"
    with pytest.raises(ValueError, match=r"non-finite score nan for question 5 'q5' at "
                                         r"candidate 'c\d+'"):
        evaluate(pool, DenseScorer(q, c), run_file=run, progress=False,
                 **eval_conf(memory_mb=0.001))
    assert not run.exists() and not list(tmp_path.iterdir())  # no partial run file left


def test_run_file_is_written_block_by_block(tmp_path):
    pool, q, c = _random_pool()
    run = tmp_path / "run.jsonl"
    seen = []

    class Watching(DenseScorer):
        def score(self, rows):
            partial = tmp_path / "run.jsonl.partial"
            # lines, not read_run_file: a partial file is refused as truncated
            seen.append(len(partial.read_text().splitlines()) if partial.exists() else None)
            return super().score(rows)

    one_row = {**search_settings(), "min_block_rows": 1}  # blocks of one row, not chunks
    evaluate(pool, Watching(q, c), run_file=run, progress=False, search=one_row,
             **eval_conf(memory_mb=0.001))
    assert seen[:3] == [0, 1, 2] and len(read_run_file(run)) == 37


def test_dense_scores_are_the_plain_product_and_leave_the_matmul_setting_as_it_was():
    q, c = torch.randn(5, 8), torch.randn(7, 8)
    before = torch.get_float32_matmul_precision()
    expected = q[1:4] @ c.T  # in full float32, as the scorer computes it
    torch.set_float32_matmul_precision("high")  # what a training run may have set (TF32)
    try:
        scorer = DenseScorer(q, c, device="cpu")
        # exact: the same product of the same shapes and settings; under "high" a CPU with
        # reduced-precision matmul would compute another one
        assert torch.equal(scorer.score(range(1, 4)), expected)
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(before)
