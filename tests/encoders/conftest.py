"""Tiny random models and batches for the encoder tests (nothing is downloaded)."""

from __future__ import annotations

import pytest
import torch

VOCAB = 100
HIDDEN = 32


def make_batch(lengths: list[int], total_length: int | None = None, seed: int = 0):
    """Right-padded ``(input_ids[B, L], attention_mask[B, L])`` with ids in [1, VOCAB)."""
    gen = torch.Generator().manual_seed(seed)
    length = total_length or max(lengths)
    ids = torch.randint(1, VOCAB, (len(lengths), length), generator=gen)
    mask = torch.zeros(len(lengths), length, dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    return ids * mask, mask


def pad_more(ids: torch.Tensor, mask: torch.Tensor, extra: int):
    """The same batch with ``extra`` more padding columns on the right."""
    zeros = torch.zeros(ids.shape[0], extra, dtype=ids.dtype)
    return torch.cat([ids, zeros], 1), torch.cat([mask, zeros.to(mask.dtype)], 1)


@pytest.fixture
def batch_factory():
    return make_batch


@pytest.fixture
def pad_factory():
    return pad_more


def tiny_bert(seed: int = 0):
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, type_vocab_size=2,
    )
    return BertModel(config).eval()


@pytest.fixture
def tiny_bert_factory():
    return tiny_bert


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """A tiny random BERT saved to a local folder, usable as ``encoder.pretrained``."""
    path = tmp_path_factory.mktemp("tiny-bert")
    tiny_bert().save_pretrained(path)
    return str(path)


def tiny_config(encoder_type: str = "gru", sharing: str = "sde", **overrides):
    """A whole towers block: conf/model/dual_encoder.yaml's (the one source of its settings)
    with a tiny random token table, ``encoder_type`` (a short name), ``sharing`` and
    ``overrides`` (a dict merges into its section, anything else replaces it)."""
    from helpers import towers_conf

    cfg = towers_conf(
        encoder={"type": encoder_type, "vocab_size": VOCAB, "embedding_dim": 16,
                 "hidden_size": HIDDEN, "num_heads": 4, "dropout": 0.0},
        pooler={"type": "multihop_attention", "hops": 3, "attention_dim": 8}, sharing=sharing)
    for section, values in overrides.items():
        if isinstance(values, dict):
            cfg[section].update(values)
        else:
            cfg[section] = values
    return cfg


@pytest.fixture
def config_factory():
    return tiny_config
