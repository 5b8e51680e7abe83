"""Pre-tokenised texts: batches equal to tokenising each batch, padding to multiples, the
on-disk cache, and the collators and data module that use them."""

from __future__ import annotations

import pytest
import torch
from helpers import damage, word_tokenizer

from retrieval_qa.data.collate import PairCollator, TextCollator, encode_texts
from retrieval_qa.data.tokenized import TokenizedTexts
from retrieval_qa.data.types import Candidate, QAPair

WORDS = "the a is of what where who paris france capital berlin germany tower city".split()
TEXTS = ["what is the capital", "where", "berlin is in germany of the city city city city",
         "paris", "the tower of paris is the tower"]
CONTEXTS = ["paris is the capital of france", "city", "the the the the the the the the the",
            "", "berlin"]


@pytest.fixture(scope="module")
def tokenizer():
    return word_tokenizer(WORDS)


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RQA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def assert_same(a: dict, b: dict) -> None:
    assert set(a) == set(b)
    for k in a:
        torch.testing.assert_close(a[k], b[k], msg=k)


@pytest.mark.parametrize("with_context", [False, True])
def test_batches_equal_tokenising_the_batch(tokenizer, with_context):
    contexts = CONTEXTS if with_context else None
    tokens = TokenizedTexts.build(tokenizer, TEXTS, 8, contexts)
    assert tokens.lengths() == encode_texts(tokenizer, TEXTS, 8, contexts)[
        "attention_mask"].sum(1).tolist()
    for rows in ([0, 1, 2, 3, 4], [3, 1], [2]):
        expected = encode_texts(tokenizer, [TEXTS[i] for i in rows], 8,
                                [contexts[i] for i in rows] if contexts else None)
        assert_same(tokens.batch(rows), expected)


def test_lengths_are_the_truncated_token_counts(tokenizer):
    tokens = TokenizedTexts.build(tokenizer, TEXTS, 8)
    mask = encode_texts(tokenizer, TEXTS, 8)["attention_mask"]
    assert tokens.lengths() == mask.sum(1).tolist()
    assert max(tokens.lengths()) == 8


def test_pad_to_multiple_of_pads_only_the_width(tokenizer):
    tokens = TokenizedTexts.build(tokenizer, TEXTS, 64)
    plain, padded = tokens.batch([0, 1]), tokens.batch([0, 1], pad_to_multiple_of=8)
    assert plain["input_ids"].shape == (2, 6) and padded["input_ids"].shape == (2, 8)
    for k in plain:  # exact: integer ids and masks
        assert torch.equal(padded[k][:, :6], plain[k])
        assert not padded[k][:, 6:].any()  # [PAD] is id 0, the mask 0
    assert tokens.batch([0, 1], pad_to_multiple_of=6)["input_ids"].shape == (2, 6)


def test_left_padding(tokenizer):
    left = word_tokenizer(WORDS)
    left.padding_side = "left"
    tokens = TokenizedTexts.build(left, TEXTS, 16)
    assert_same(tokens.batch([0, 1]), encode_texts(left, TEXTS[:2], 16))


def test_cache_round_trip_and_keys(tokenizer, cache_dir):
    first = TokenizedTexts.build(tokenizer, TEXTS, 8, CONTEXTS)
    files = list((cache_dir / "tokenized").glob("*.arrow"))
    assert len(files) == 1
    again = TokenizedTexts.build(tokenizer, TEXTS, 8, CONTEXTS)
    assert len(list((cache_dir / "tokenized").glob("*.arrow"))) == 1  # read, not rebuilt
    assert_same(again.batch(range(5)), first.batch(range(5)))
    TokenizedTexts.build(tokenizer, TEXTS, 9, CONTEXTS)            # another length
    TokenizedTexts.build(tokenizer, TEXTS[:4], 8, CONTEXTS[:4])    # other texts
    TokenizedTexts.build(word_tokenizer(WORDS[:-1]), TEXTS, 8, CONTEXTS)  # another vocabulary
    assert len(list((cache_dir / "tokenized").glob("*.arrow"))) == 4


def _other_rows(path):
    """The cache file of other texts (fewer rows) under this file's name."""
    import pyarrow.ipc as ipc

    with ipc.open_file(path) as reader:
        table = reader.read_all().slice(0, 2)
    with ipc.new_file(path, table.schema) as writer:
        writer.write_table(table)


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage", "other_rows", "no_ids"])
def test_a_damaged_cache_file_is_rebuilt_with_a_warning(tokenizer, cache_dir, how, caplog):
    import logging

    first = TokenizedTexts.build(tokenizer, TEXTS, 8, CONTEXTS)
    (path,) = (cache_dir / "tokenized").glob("*.arrow")
    if damage(path, how):
        pass
    elif how == "other_rows":
        _other_rows(path)
    else:  # a table without its ids column (not of this layout)
        import pyarrow as pa
        import pyarrow.ipc as ipc

        table = pa.table({"other": [1, 2]})
        with ipc.new_file(path, table.schema) as writer:
            writer.write_table(table)
    with caplog.at_level(logging.WARNING):
        again = TokenizedTexts.build(tokenizer, TEXTS, 8, CONTEXTS)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith(f"damaged cache {path} (") and warning.endswith("): rebuilding")
    assert_same(again.batch(range(5)), first.batch(range(5)))
    assert again.lengths() == first.lengths()
    caplog.clear()
    TokenizedTexts.build(tokenizer, TEXTS, 8, CONTEXTS)  # written again whole: no warning
    assert not caplog.records and list(path.parent.iterdir()) == [path]


def test_collators_cut_rows_from_tokens(tokenizer):
    pairs = [QAPair(t, c or "x", "ctx", f"q{i}", f"a{i}") for i, (t, c) in
             enumerate(zip(TEXTS, CONTEXTS, strict=True))]
    items = [(3, pairs[3], 0.5), (0, pairs[0], 2.0)]
    plain = PairCollator(tokenizer, 8, 12)(items)
    tokens = (TokenizedTexts.build(tokenizer, [p.question for p in pairs], 8),
              TokenizedTexts.build(tokenizer, [p.answer for p in pairs], 12))
    fast = PairCollator(tokenizer, 8, 12, tokens=tokens)(items)
    for side in ("question", "answer"):
        assert_same(fast[side], plain[side])
    # exact: indices, and weights copied from the items, not computed
    assert torch.equal(fast["index"], plain["index"]) and torch.equal(fast["weight"],
                                                                      plain["weight"])
    cands = [Candidate(f"c{i}", t, c, f"d{i}") for i, (t, c) in
             enumerate(zip(TEXTS, CONTEXTS, strict=True))]
    items = [(4, cands[4], (1, 4)), (2, cands[2], (0, 2))]
    plain = TextCollator(tokenizer, 10, "answer", with_context=True)(items)
    fast = TextCollator(tokenizer, 10, "answer", with_context=True,
                        tokens=TokenizedTexts.build(tokenizer, TEXTS, 10, CONTEXTS))(items)
    assert_same(fast, plain)


def test_the_data_module_tokenises_each_pool_once(tmp_path, monkeypatch):
    """Validation every epoch reuses the pool's ids (one build per pool, not one per call)."""
    from helpers import TINY_SQUAD, from_conf, make_dirs

    root, _ = make_dirs(tmp_path / "d", TINY_SQUAD)
    from transformers import AutoTokenizer

    data = from_conf("data", "reqa_squad",
                     tokenizer=AutoTokenizer.from_pretrained(root / "tokenizer"),
                     data_dir=str(root / "data"))
    builds = []
    original = TokenizedTexts.build.__func__
    monkeypatch.setattr(TokenizedTexts, "build", classmethod(
        lambda cls, *a, **k: (builds.append(1), original(cls, *a, **k))[1]))
    data.val_dataloader()
    data.val_dataloader()
    data.test_dataloader()
    assert len(builds) == 4  # candidates and questions of the validation and test pools
