"""Approximate search (retrieval_qa/evaluation/approximate.py, faiss-cpu: the `search`
extra): its lists ranked by the evaluator's rules, a gold candidate not returned tied below
the list (n + (C - n + 1) / 2), and the settings of conf/search.yaml checked."""

from __future__ import annotations

import pytest
import torch

from retrieval_qa.data import Candidate, RetrievalPool
from retrieval_qa.errors import UsageError
from retrieval_qa.evaluation import DenseScorer, evaluate
from retrieval_qa.evaluation.evaluator import search_settings

faiss = pytest.importorskip("faiss", reason="faiss-cpu is not installed (pip install -e '.[search]')")


def _pool(n_q=30, n_c=2000, dim=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, c = torch.randn(n_q, dim, generator=g), torch.randn(n_c, dim, generator=g)
    gold = torch.randint(0, n_c, (n_q, 1), generator=g).tolist()
    pool = RetrievalPool("random", "test", [Candidate(str(i), "", "", f"d{i // 4}")
                                            for i in range(n_c)],
                         [f"q{i}" for i in range(n_q)], gold)
    return pool, DenseScorer(q, c)


def _settings(**over):
    return {**search_settings(), **over}


@pytest.mark.parametrize("index", ["faiss-ivf", "faiss-hnsw"])
def test_lists_of_every_candidate_give_the_exact_ranks(index):
    pool, scorer = _pool()
    exact = evaluate(pool, scorer, top_k=10, memory_mb=1, ks=(1, 5), doc_level=True,
                     progress=False, search=_settings())
    full = _settings(index=index, list_size=2000, ivf={"nlist": 8, "nprobe": 8,
                                                       "train_size": 2000},
                     hnsw={"m": 16, "ef_construction": 200, "ef_search": 2000})
    approx = evaluate(pool, scorer, top_k=10, memory_mb=1, ks=(1, 5), doc_level=True,
                      progress=False, search=full)
    assert torch.equal(approx.ranks, exact.ranks)
    assert torch.equal(approx.doc_ranks, exact.doc_ranks)
    assert approx.summary()["search"]["index"] == index and "search" not in exact.summary()


def test_a_gold_candidate_not_returned_ranks_tied_below_the_list():
    pool, scorer = _pool(n_q=5, n_c=400)
    scores = scorer.score(range(0, 5))
    worst = scores.argmin(dim=1).view(-1, 1).tolist()  # never among the 10 best
    pool = RetrievalPool(pool.dataset, pool.pool, pool.candidates, pool.questions, worst)
    result = evaluate(pool, scorer, top_k=10, memory_mb=1, ks=(1,), doc_level=False,
                      progress=False, search=_settings(index="faiss-hnsw", list_size=10))
    assert result.ranks.tolist() == [10 + (400 - 10 + 1) / 2] * 5
    assert result.metrics["mrr@100"] == 0.0


@pytest.mark.parametrize(("over", "message"), [
    ({"index": "annoy"}, "index='annoy'"),
    ({"list_size": 0}, "list_size=0"),
    ({"ivf": {"nlist": 0, "nprobe": 1, "train_size": 1}}, "ivf.nlist=0"),
    ({"min_block_rows": 1.5}, "min_block_rows=1.5"),
])
def test_bad_search_settings_are_one_line_naming_the_key(over, message):
    with pytest.raises(UsageError, match=message.replace(".", r"\.").replace("(", r"\(")):
        search_settings(_settings(**over))


def test_rqa_evaluate_index_is_an_option_of_checkpoint_only(capsys):
    from retrieval_qa.cli import main

    assert main(["evaluate", "--model", "bm25", "--index", "faiss-ivf"]) == 2
    assert "--index faiss-ivf searches the embeddings of --checkpoint" in capsys.readouterr().err
