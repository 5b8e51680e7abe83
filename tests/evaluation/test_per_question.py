"""The per-question record: written beside a run file, small, and read back to the same
metrics as the evaluation (exactly: the ranks are stored exactly)."""

import gzip
import json

import pytest
import torch
from helpers import assert_ranks_fit_scores, eval_conf

from retrieval_qa.data.types import Candidate, RetrievalPool
from retrieval_qa.errors import DataFormatError
from retrieval_qa.evaluation import DenseScorer, evaluate
from retrieval_qa.evaluation.per_question import (
    beside_run_file,
    from_run_file,
    pool_fingerprint,
    read_per_question,
    write_per_question,
)

KS = tuple(eval_conf()["ks"])


def _pool(n_q=41, n_c=60, n_docs=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    cands = [Candidate(f"c{i}", f"sentence {i} " * (1 + i % 3), f"doc{i % n_docs}",
                       f"d{i % n_docs}") for i in range(n_c)]
    gold = [sorted(set(torch.randint(0, n_c, (int(torch.randint(1, 3, (1,), generator=g)),),
                                     generator=g).tolist())) for _ in range(n_q)]
    words = ["What", "Who", "When", "How"]
    pool = RetrievalPool("toy", "dev", cands,
                         [f"{words[i % 4]} is thing {i}?" for i in range(n_q)], gold)
    q = torch.randint(-2, 3, (n_q, 4), generator=g).float()  # many exact ties
    c = torch.randint(-2, 3, (n_c, 4), generator=g).float()
    return pool, q, c


def test_written_beside_the_run_file_and_reproduces_the_metrics_exactly(tmp_path):
    pool, q, c = _pool()
    run = tmp_path / "bm.jsonl"
    result = evaluate(pool, DenseScorer(q, c), run_file=run, progress=False,
                      **eval_conf(top_k=3))
    path = beside_run_file(run)
    assert path.name == "bm.questions.jsonl.gz" and result.per_question == str(path)
    record = read_per_question(path)
    assert record.metrics() == result.metrics  # exact, not approximate
    assert record.ranks.tolist() == result.ranks.tolist()
    assert any(r % 1 for r in record.ranks)  # ties: average ranks survive the round trip
    assert record.ids == [str(i) for i in range(41)]
    assert record.header["pool_fingerprint"] == pool_fingerprint(pool)
    assert record.extra["qword"][:4] == ["what", "who", "when", "how"]
    assert from_run_file(run, KS).metrics() == result.metrics
    rows = [json.loads(line) for line in gzip.open(path, "rt")][1:]
    assert {"id", "gold_rank", "rr", "r@1", "r@5", "r@10", "doc_rank", "doc_rr"} <= set(rows[0])


def test_same_evaluation_writes_the_same_bytes_and_is_small(tmp_path):
    pool, q, c = _pool(n_q=400, n_c=300)
    ranks = evaluate(pool, DenseScorer(q, c), progress=False, **eval_conf())
    a = write_per_question(tmp_path / "a.jsonl.gz", pool, ranks.ranks, ranks.doc_ranks, KS)
    b = write_per_question(tmp_path / "b.jsonl.gz", pool, ranks.ranks, ranks.doc_ranks, KS)
    assert a.read_bytes() == b.read_bytes()
    assert a.stat().st_size < 400 * 20  # about 10 bytes a question once gzipped


def test_ranks_of_rounded_scores_fit_the_scores_and_wrong_ranks_do_not(tmp_path):
    """The check of tests/helpers.py that replaces == on the ranks of two computations
    that differ in float rounding: it takes the ranks of scores moved by up to 1e-6 and
    refuses ranks one place off."""
    pool, q, c = _pool()
    g = torch.Generator().manual_seed(1)
    q, c = q + torch.rand(q.shape, generator=g), c + torch.rand(c.shape, generator=g)
    moved = q + 1e-7 * torch.randn(q.shape, generator=g)  # scores move by up to about 1e-6
    run = tmp_path / "moved.jsonl"
    result = evaluate(pool, DenseScorer(moved, c), run_file=run, progress=False, **eval_conf())
    record = read_per_question(beside_run_file(run))
    assert_ranks_fit_scores(record, pool, q @ c.T, atol=1e-5)
    record.ranks = result.ranks.numpy() + 1
    with pytest.raises(AssertionError, match="question 0: rank"):
        assert_ranks_fit_scores(record, pool, q @ c.T, atol=1e-5)
    record.ranks, record.doc_ranks = result.ranks.numpy(), result.doc_ranks.numpy() + 1
    with pytest.raises(AssertionError, match="question 0: doc rank"):
        assert_ranks_fit_scores(record, pool, q @ c.T, atol=1e-5)
    record.doc_ranks = result.doc_ranks.numpy()
    with pytest.raises(AssertionError, match="not fixed by the scores"):
        assert_ranks_fit_scores(record, pool, torch.zeros(len(q), len(c)), atol=1e-5)


def test_no_run_file_no_record(tmp_path):
    pool, q, c = _pool()
    assert evaluate(pool, DenseScorer(q, c), progress=False,
                    **eval_conf()).per_question is None


@pytest.mark.parametrize("content, where", [
    (b"not gzip", "not gzipped"),
    (b"", "empty file"),
    (gzip.compress(mtime=0, data=b'{"format": "rqa-per-question/1", "questions": 1}\n{"id": "0", '
                   b'"gold_rank": 1}\n')[:-9], "not gzipped"),  # truncated
    (gzip.compress(mtime=0, data=b'{"id": "0", "gold_rank": 1}\n'), "no header"),
    (gzip.compress(mtime=0, data=b'{"format": "rqa-per-question/0"}\n'),
     "format 'rqa-per-question/0'; this version reads 'rqa-per-question/1'"),
    (gzip.compress(mtime=0, data=b'{"format": "rqa-per-question/1", "questions": 2}\n{"id": "0", '
                   b'"gold_rank": 1}\n'), "1 rows, the header says 2"),
    (gzip.compress(mtime=0, data=b'{"format": "rqa-per-question/1", "questions": 1}\n{"id": "0", '
                   b'"gold_rank": 0}\n'), "line 2"),
])
def test_bad_record_names_the_file_and_the_fix(tmp_path, content, where):
    path = tmp_path / "bad.jsonl.gz"
    path.write_bytes(content)
    with pytest.raises(DataFormatError, match=where) as e:
        read_per_question(path)
    assert "bad.jsonl.gz" in str(e.value) and "rqa evaluate" in str(e.value)
    assert "write it again with the command that wrote it" in str(e.value)  # the fix


