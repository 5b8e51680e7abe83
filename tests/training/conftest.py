"""Fixtures of the training tests: a synthetic SQuAD-format data dir and a word tokenizer."""

from __future__ import annotations

import pytest
from helpers import TINY_SQUAD, WORDS, synthetic_squad, write_json_gz
from transformers import BertTokenizerFast


@pytest.fixture(scope="module")
def setup_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    write_json_gz(root / "data" / "squad" / "train-v1.1.json.gz", synthetic_squad())
    write_json_gz(root / "data" / "squad" / "dev-v1.1.json.gz", TINY_SQUAD)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = specials + WORDS + [str(i) for i in range(10)]
    tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
    tok.save_pretrained(root / "tokenizer")
    return root, len(vocab)
