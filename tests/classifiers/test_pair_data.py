"""Gold pairs and sampled negatives for the concatenated-pair classifier."""

from __future__ import annotations

import pytest
import torch
from helpers import WORDS, synthetic_squad, write_json_gz
from transformers import BertTokenizerFast

from retrieval_qa.classifiers.pair_data import (
    ClassifierPairDataModule,
    ClassifierPairSampler,
    encode_pairs,
)
from retrieval_qa.data import load_pool


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    root = tmp_path_factory.mktemp("pairs")
    write_json_gz(root / "squad" / "train-v1.1.json.gz", synthetic_squad(12))
    built, _ = load_pool("reqa_squad", "train", root, use_cache=False)
    return built


@pytest.fixture(scope="module")
def tokenizer():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *map(str, range(200)), "?",
             ".", "fact", "form", "(", ")"]
    return BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})


def test_batches_are_balanced_deterministic_and_never_gold(pool):
    a = ClassifierPairSampler(pool, seed=3, same_paragraph=0.5)
    b = ClassifierPairSampler(pool, seed=3, same_paragraph=0.5)
    for _ in range(5):
        qa, sa, ya = a.batch(10)
        qb, sb, yb = b.batch(10)
        assert (qa, sa) == (qb, sb) and torch.equal(ya, yb)
        assert ya.tolist() == [1.0] * 5 + [0.0] * 5 and qa[:5] == qa[5:]
        for q, s in zip(qa[:5], sa[:5], strict=True):
            assert s in a.gold[q]
        for q, s in zip(qa[5:], sa[5:], strict=True):
            assert s not in a.gold[q]


def test_same_paragraph_share_decides_where_negatives_come_from(pool):
    doc_of_text = {c.text: c.doc_id for c in pool.candidates}

    def share_same(chance: float) -> float:
        sampler = ClassifierPairSampler(pool, seed=0, same_paragraph=chance)
        _, s, _ = sampler.batch(400)
        pairs = list(zip(s[:200], s[200:], strict=True))  # (gold sentence, its negative)
        return sum(doc_of_text[g] == doc_of_text[n] for g, n in pairs) / len(pairs)

    assert share_same(1.0) == 1.0  # every paragraph has another, non-gold sentence
    assert share_same(0.0) < 0.3  # random sentences of 12 paragraphs
    with pytest.raises(ValueError, match="same_paragraph"):
        ClassifierPairSampler(pool, seed=0, same_paragraph=1.5)


def test_the_datamodule_yields_tokenised_batches_with_labels(pool, tokenizer):
    data = ClassifierPairDataModule(pool, tokenizer, batch_size=6, steps=4, max_length=24,
                                    seed=0, same_paragraph=0.5)
    batches = list(data.train_dataloader())
    assert len(batches) == 4
    for batch in batches:
        assert batch["labels"].tolist() == [1.0] * 3 + [0.0] * 3
        assert batch["input_ids"].shape[0] == 6 and batch["input_ids"].shape[1] <= 24
        assert (batch["input_ids"][:, 0] == tokenizer.cls_token_id).all()
        # two segments: [CLS] question [SEP] sentence [SEP]
        assert (batch["input_ids"] == tokenizer.sep_token_id).sum(1).eq(2).all()
    enc = encode_pairs(tokenizer, ["what is fact 1 ?"], ["fact 1 is 2 ."], 64)
    assert enc["token_type_ids"].sum() > 0 and set(enc) <= {"input_ids", "attention_mask",
                                                            "token_type_ids"}
