"""The data module's tokenisation part alone: each text list tokenised once, the lengths of
the buckets and of the evaluation order read off the ids, the collators cutting batches from
them, and frozen features in place of tokens."""

from __future__ import annotations

import pytest
import torch
from helpers import WORDS, word_tokenizer

from retrieval_qa.data.collate import PairCollator, token_lengths
from retrieval_qa.data.features import FeatureTable
from retrieval_qa.data.loading import load_pool
from retrieval_qa.data.token_memo import TokenMemo, TokenSettings, load_features

SETTINGS = TokenSettings(max_question_length=8, max_answer_length=12,
                         answer_with_context=False, pad_to_multiple_of=None)


@pytest.fixture
def pool(tiny_squad_file):
    return load_pool("reqa_squad", "dev", data_dir=tiny_squad_file.parents[1])[0]


@pytest.fixture(scope="module")
def tokenizer():
    return word_tokenizer(WORDS + "paris berlin germany munich bavaria capital tower".split())


def test_a_bad_padding_multiple_is_refused():
    with pytest.raises(ValueError, match="pad_to_multiple_of=0"):
        TokenSettings(8, 12, False, 0)


def test_each_text_list_is_tokenised_once(pool, tokenizer):
    memo = TokenMemo(tokenizer, SETTINGS)
    assert memo.pretokenized and memo.tokenizer is tokenizer
    candidates, questions = memo.pool_tokens(pool)
    assert memo.pool_tokens(pool) == (candidates, questions)
    assert memo.pool_tokens(pool)[0] is candidates
    assert candidates.lengths() == token_lengths(tokenizer, [c.text for c in pool.candidates], 12)
    assert questions.lengths() == token_lengths(tokenizer, pool.questions, 8)
    assert memo.memo("owner", lambda: 1) == 1 and memo.memo("owner", lambda: 2) == 1


def test_pair_lengths_and_the_pair_collator(pool, tokenizer):
    memo = TokenMemo(tokenizer, SETTINGS)
    pairs = pool.pairs
    q = token_lengths(tokenizer, [p.question for p in pairs], 8)
    a = token_lengths(tokenizer, [p.answer for p in pairs], 12)
    assert memo.pair_lengths(pairs, "tokens") == [x + y for x, y in zip(q, a, strict=True)]
    chars = [min(8, len(p.question) // 4 + 1) + min(12, len(p.answer) // 4 + 1) for p in pairs]
    assert memo.pair_lengths(pairs, "chars") == chars
    items = [(i, p) for i, p in enumerate(pairs)]
    cut = memo.pair_collator(pairs)(items)  # from the ids tokenised once
    encoded = PairCollator(tokenizer, 8, 12)(items)  # tokenised in the batch
    for side in ("question", "answer"):
        assert torch.equal(cut[side]["input_ids"], encoded[side]["input_ids"])
    assert cut["index"].tolist() == list(range(len(pairs)))


def test_eval_sides_and_the_copies_of_a_candidate(pool, tokenizer):
    memo = TokenMemo(tokenizer, SETTINGS)
    candidates, questions = memo.eval_sides(pool)
    assert candidates.lengths == memo.pool_tokens(pool)[0].lengths()
    assert questions.lengths == memo.pool_tokens(pool)[1].lengths()
    batch = questions.collate_fn([(1, pool.questions[1], pool.gold[1])])
    assert batch["index"].tolist() == [1] and batch["gold"] == [pool.gold[1]]
    assert batch["input_ids"].shape[1] == questions.lengths[1]
    texts = [c.text for c in pool.candidates]
    berlin = [i for i, t in enumerate(texts) if t == "Berlin is in Germany."]
    copies = memo.first_copies(pool)
    assert copies[berlin[1]] == berlin[0]  # the same sentence: one encoder input
    with_context = TokenMemo(tokenizer, TokenSettings(8, 12, True, None))
    assert with_context.first_copies(pool)[berlin[1]] == berlin[1]  # other paragraphs
    assert with_context.candidate_contexts(pool) == [c.context for c in pool.candidates]


def test_frozen_features_take_the_tokenizers_place(pool):
    texts = sorted(set(pool.questions) | {c.text for c in pool.candidates})
    table = FeatureTable(texts, torch.randn(len(texts), 4))
    assert load_features(table) is table and load_features(None) is None
    memo = TokenMemo(None, SETTINGS, table)
    assert not memo.pretokenized and memo.tokenizer is table
    candidates, questions = memo.eval_sides(pool)
    assert candidates.lengths == [1] * len(pool.candidates)
    assert set(questions.collate_fn([(0, pool.questions[0])])) == {"features", "index"}
    memo.check_pool_covered(pool, "test")
    memo.check_pairs_covered(pool.pairs, "training")
    short = TokenMemo(None, SETTINGS, FeatureTable(texts[1:], torch.randn(len(texts) - 1, 4)))
    with pytest.raises(KeyError, match="no vector for 1 test"):
        short.check_pool_covered(pool, "test")
    TokenMemo(None, SETTINGS).check_pool_covered(pool, "test")  # no features: nothing to check
