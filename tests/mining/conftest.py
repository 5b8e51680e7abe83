"""Fixtures of the mining tests: a MultiReQA-layout data dir (train rebuilt from its
boundaries, MRQA test pool), its training pool, a tiny BERT and a tiny retriever export."""

from __future__ import annotations

import pytest
from mining_helpers import save_tiny_bert, save_tiny_retriever, write_multireqa_dir


@pytest.fixture(scope="module")
def mining_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("mining")
    data = write_multireqa_dir(root / "data")
    bert = save_tiny_bert(root / "bert")
    retriever = save_tiny_retriever(root / "retriever", bert)
    return {"root": root, "data": data, "bert": bert, "retriever": retriever}


@pytest.fixture(scope="module")
def train_pool(mining_dirs):
    from retrieval_qa.data import load_pool

    pool, _ = load_pool("multireqa_squad", "train", mining_dirs["data"], use_cache=False)
    return pool
