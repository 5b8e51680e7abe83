import math

import numpy as np
import pytest
import torch

from retrieval_qa.embeddings.idf import IDF, word_tokens
from retrieval_qa.embeddings.pooling import mean_pool


def test_idf_three_documents_by_hand():
    docs = [["the", "cat", "sat"], ["the", "dog", "sat", "sat"], ["the", "bird"]]
    idf = IDF(docs)
    assert idf["the"] == 0.0                       # in all 3: log(3/3)
    assert idf["sat"] == pytest.approx(math.log(3 / 2))   # repeated in a doc counts once
    assert idf["cat"] == pytest.approx(math.log(3))
    assert idf["bird"] == pytest.approx(math.log(3))
    assert idf["zebra"] == pytest.approx(math.log(3))      # unseen: as rare as can be
    assert idf.weights(["the", "sat"]) == [0.0, pytest.approx(math.log(1.5))]


def test_word_tokens_lowercase_and_punctuation():
    assert word_tokens("Who's the U.S. President?") == \
        ["who", "'", "s", "the", "u", ".", "s", ".", "president", "?"]


def test_mean_pool_with_and_without_idf_by_hand():
    vocab = {"a": 0, "b": 1, "c": 2}
    m = np.array([[1.0, 0.0], [0.0, 1.0], [3.0, 4.0]], dtype=np.float32)
    docs = [["a", "b", "zzz"], ["a", "c"], ["zzz"]]
    pooled, notes = mean_pool(docs, vocab, m)
    torch.testing.assert_close(pooled[0], torch.tensor([0.5, 0.5]) / math.sqrt(0.5))
    torch.testing.assert_close(pooled[2], torch.zeros(2))
    assert notes == {"texts": 3, "tokens": 6, "oov_tokens": 2, "empty_texts": 1}
    idf = IDF([["a", "b"], ["a"]])  # idf(a) = 0, idf(b) = log 2, idf(c) unseen = log 2
    pooled, _ = mean_pool(docs, vocab, m, idf)
    torch.testing.assert_close(pooled[0], torch.tensor([0.0, 1.0]))   # only b counts
    torch.testing.assert_close(pooled[1], torch.tensor([0.6, 0.8]))   # only c counts
    chunked, _ = mean_pool(docs, vocab, m, idf, chunk=1)
    torch.testing.assert_close(chunked, pooled)
