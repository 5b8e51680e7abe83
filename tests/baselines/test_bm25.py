import math

import pytest
import torch

from retrieval_qa.baselines.bm25 import BM25Scorer, BM25Settings
from retrieval_qa.data.types import Candidate, RetrievalPool
from retrieval_qa.evaluation import evaluate

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
    assert evaluate(pool, BM25Scorer(pool, PLAIN), progress=False).ranks.tolist() == [2.0]


def test_stemming_stopwords_and_context_settings_matter():
    pool = _pool(["running dogs"], ["the dog runs", "cats sleeping"], ["x", "running dogs"])
    stem = BM25Settings(**{**PLAIN.__dict__, "stemmer": "english", "stopwords": "english"})
    assert BM25Scorer(pool, PLAIN).score(range(1))[0, 0] == 0  # no exact token overlap
    assert BM25Scorer(pool, stem).score(range(1))[0, 0] > 0
    ctx = BM25Settings(**{**PLAIN.__dict__, "with_context": True})
    assert BM25Scorer(pool, ctx).score(range(1))[0, 1] > 0
    assert ctx.to_dict()["with_context"] is True and "tokenizer" in ctx.to_dict()
