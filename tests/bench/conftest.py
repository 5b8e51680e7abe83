"""The benches' fixture: a tiny random BERT (with the synthetic data's word tokenizer) that
both sides load, and the synthetic SQuAD files as the data dir."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import make_dirs, synthetic_squad


@pytest.fixture
def tiny_setup(tmp_path, monkeypatch, one_thread) -> Path:
    """$RQA_DATA_DIR: the synthetic SQuAD train and dev files; returns a tiny random BERT
    folder (hidden 16, one layer) with their word tokenizer, loadable by both sides."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    root, vocab = make_dirs(tmp_path, dev=synthetic_squad(n_paragraphs=12))
    monkeypatch.setenv("RQA_DATA_DIR", str(root / "data"))
    model = tmp_path / "tiny-bert"
    BertTokenizerFast.from_pretrained(root / "tokenizer").save_pretrained(model)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=vocab, hidden_size=16, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=32,
                         max_position_embeddings=128)).save_pretrained(model)
    return model
