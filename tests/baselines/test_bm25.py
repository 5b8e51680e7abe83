import math

import numpy as np
import pytest
import torch
from helpers import eval_conf

from retrieval_qa.baselines.bm25 import BM25Scorer, BM25Settings
from retrieval_qa.data.types import Candidate, RetrievalPool
from retrieval_qa.evaluation import evaluate, read_run_file

PLAIN = BM25Settings(k1=1.2, b=0.75, method="lucene", stopwords=None, stemmer=None,
                     lowercase=True, with_context=False)


def _pool(questions, texts, contexts=None):
    contexts = contexts or ["ctx"] * len(texts)
    cands = [Candidate(f"c{i}", t, c, f"d{i}") for i, (t, c) in enumerate(zip(texts, contexts,
                                                                             strict=True))]
    return RetrievalPool("toy", "dev", cands, questions, [[0]] * len(questions))


def _lucene(query, docs, k1=1.2, b=0.75):
    """Reference BM25 (Lucene variant) written out by hand."""
    toks = [d.lower().split() for d in docs]
    avgdl = sum(map(len, toks)) / len(toks)
    out = []
    for d in toks:
        s = 0.0
        for t in query.lower().split():
            df = sum(t in x for x in toks)
            if df == 0:
                continue
            idf = math.log(1 + (len(toks) - df + 0.5) / (df + 0.5))
            tf = d.count(t)
            s += idf * tf / (tf + k1 * (1 - b + b * len(d) / avgdl))
        out.append(s)
    return out


def test_scores_match_hand_written_lucene_bm25():
    docs = ["the cat sat on the mat", "dogs chase cats", "the dog sat", "one bird sang"]
    pool = _pool(["dog sat mat"], docs)
    got = BM25Scorer(pool, PLAIN).score(range(1))[0]
    assert got.tolist() == pytest.approx(_lucene("dog sat mat", docs), rel=1e-5)


def test_unknown_query_terms_give_zero_scores_and_average_rank():
    pool = _pool(["zebra"], ["one two", "three four", "five six"])
    scores = BM25Scorer(pool, PLAIN).score(range(1))
    assert torch.count_nonzero(scores) == 0
    assert evaluate(pool, BM25Scorer(pool, PLAIN), progress=False,
                    **eval_conf()).ranks.tolist() == [2.0]


def test_stemming_stopwords_and_context_settings_matter():
    pool = _pool(["running dogs"], ["the dog runs", "cats sleeping"], ["x", "running dogs"])
    stem = BM25Settings(**{**PLAIN.__dict__, "stemmer": "english", "stopwords": "english"})
    assert BM25Scorer(pool, PLAIN).score(range(1))[0, 0] == 0  # no exact token overlap
    assert BM25Scorer(pool, stem).score(range(1))[0, 0] > 0
    ctx = BM25Settings(**{**PLAIN.__dict__, "with_context": True})
    assert BM25Scorer(pool, ctx).score(range(1))[0, 1] > 0
    assert ctx.to_dict()["with_context"] is True and "tokenizer" in ctx.to_dict()


def _pool_with_docs(questions, texts, n_docs=3):
    cands = [Candidate(f"c{i}", t, f"ctx{i % n_docs}", f"d{i % n_docs}")
             for i, t in enumerate(texts)]
    gold = [[i % len(texts), (3 * i + 1) % len(texts)] for i in range(len(questions))]
    return RetrievalPool("toy", "dev", cands, questions, gold)


TEXTS = ["the cat sat on the mat", "dogs chase cats", "the dog sat", "one bird sang",
         "cat cat cat dog", "a mat for a dog", "birds and cats and dogs sat", "nothing here",
         "sat sat mat", "dog"]
QUESTIONS = ["dog sat mat", "cat cat dog", "zebra", "bird sang sat cat dog mat",
             "mat mat mat dog", "the", "dogs chase cats sat"]


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_sparse_scores_are_bit_identical_to_full_rows(method):
    """Repeated query tokens, unknown tokens and the non-occurrence score of bm25l/bm25+:
    score_sparse lists each touched candidate once with exactly get_scores's float32 value,
    and every other candidate at base."""
    pool = _pool_with_docs(QUESTIONS, TEXTS)
    scorer = BM25Scorer(pool, BM25Settings(**{**PLAIN.__dict__, "method": method}))
    rows = range(len(QUESTIONS))
    dense = scorer.score(rows).numpy()
    block = scorer.score_sparse(rows)
    assert block.values.dtype == dense.dtype
    assert np.array_equal(block.dense(), dense)
    keys = block.row_of() * len(TEXTS) + block.cols
    assert len(np.unique(keys)) == len(keys)
    again = scorer.score_sparse(range(2, 5))
    assert np.array_equal(again.dense(), dense[2:5])


def test_sparse_and_full_row_evaluation_agree(tmp_path):
    pool = _pool_with_docs(QUESTIONS * 3, TEXTS)
    scorer = BM25Scorer(pool, PLAIN)
    old = evaluate(pool, scorer, sparse=False, run_file=tmp_path / "old.jsonl", progress=False,
                   **eval_conf(top_k=4))
    # a tiny budget: many blocks of a few rows each
    new = evaluate(pool, scorer, run_file=tmp_path / "new.jsonl", progress=False,
                   **eval_conf(top_k=4, memory_mb=0.0005))
    # exact: both paths make each score by the same float32 additions in the same order
    assert torch.equal(old.ranks, new.ranks) and torch.equal(old.doc_ranks, new.doc_ranks)
    assert old.metrics == new.metrics
    a, b = read_run_file(tmp_path / "old.jsonl"), read_run_file(tmp_path / "new.jsonl")
    for x, y in zip(a, b, strict=True):
        assert x["top_scores"] == y["top_scores"] and x["gold_rank"] == y["gold_rank"]
        assert x["doc_rank"] == y["doc_rank"]
        listed = list(zip(y["top_scores"], y["top_ids"], strict=True))
        # ties by candidate index
        assert listed == sorted(listed, key=lambda t: (-t[0], int(t[1][1:])))
