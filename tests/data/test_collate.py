"""Collators: shapes, dynamic padding, truncation, sentence + context segments, weights."""

from __future__ import annotations

import pytest
import torch
from transformers import BertTokenizerFast

from retrieval_qa.data.collate import PairCollator, TextCollator, first_copies
from retrieval_qa.data.types import Candidate, QAPair

WORDS = "the a is of what where who paris france capital berlin germany tower city river".split()


@pytest.fixture(scope="module")
def tokenizer():
    """A word-level WordPiece tokenizer: one token per word or punctuation mark (unknown
    words become one [UNK]), so token counts are easy to state."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    return BertTokenizerFast(vocab={w: i for i, w in enumerate(specials + WORDS)})


def words(n: int) -> str:
    return " ".join(["city"] * n)


def pair(q: str, a: str, c: str = "the context", k: int = 0) -> QAPair:
    return QAPair(q, a, c, f"q{k}", f"a{k}")


def test_pair_batch_structure_and_dynamic_padding(tokenizer):
    collate = PairCollator(tokenizer, max_question_length=64, max_answer_length=96)
    items = [(4, pair("what is the capital", "paris is the capital")),
             (9, pair("where", "berlin is in germany of the city"))]
    batch = collate(items)
    assert set(batch) == {"question", "answer", "index"}
    assert set(batch["question"]) == {"input_ids", "attention_mask", "token_type_ids"}
    assert batch["question"]["input_ids"].shape == (2, 6)  # [CLS] 4 words [SEP], not 64
    assert batch["answer"]["input_ids"].shape == (2, 9)    # longest answer: 7 words + 2
    assert batch["question"]["attention_mask"].tolist()[1] == [1, 1, 1, 0, 0, 0]
    assert batch["index"].tolist() == [4, 9] and batch["index"].dtype == torch.long
    assert batch["question"]["input_ids"].dtype == torch.long


def test_truncation_at_max_length(tokenizer):
    collate = PairCollator(tokenizer, max_question_length=8, max_answer_length=10)
    batch = collate([(0, pair(words(30), words(50))), (1, pair("what", "paris"))])
    assert batch["question"]["input_ids"].shape == (2, 8)
    assert batch["answer"]["input_ids"].shape == (2, 10)
    assert batch["question"]["input_ids"][0, -1].item() == tokenizer.sep_token_id


def test_weights_carried_only_when_given(tokenizer):
    collate = PairCollator(tokenizer, 16, 16)
    assert "weight" not in collate([(0, pair("what", "paris"))])
    batch = collate([(0, pair("what", "paris"), 0.5), (1, pair("who", "berlin"), 2.0)])
    assert batch["weight"].dtype == torch.float32
    assert batch["weight"].tolist() == [0.5, 2.0]


def test_sentence_and_context_segments_truncate_only_the_context(tokenizer):
    collate = PairCollator(tokenizer, 16, max_answer_length=12, answer_with_context=True)
    sentence = "paris is the capital"  # 4 tokens
    batch = collate([(0, pair("what", sentence, words(40))),
                     (1, pair("who", "berlin", "the city"))])
    ans = batch["answer"]
    assert ans["input_ids"].shape == (2, 12)
    ids = tokenizer(sentence, add_special_tokens=False)["input_ids"]
    assert ans["input_ids"][0, 1:5].tolist() == ids           # the sentence is intact
    assert ans["input_ids"][0, 5].item() == tokenizer.sep_token_id
    assert ans["token_type_ids"][0].tolist() == [0] * 6 + [1] * 6  # context segment truncated
    assert ans["token_type_ids"][1].tolist()[:6] == [0, 0, 0, 1, 1, 1]
    assert ans["attention_mask"][1].sum().item() == 6          # [CLS] b [SEP] the city [SEP]


def test_sentence_longer_than_max_length_falls_back(tokenizer):
    collate = PairCollator(tokenizer, 16, max_answer_length=10, answer_with_context=True)
    batch = collate([(0, pair("what", words(30), "the context")),
                     (1, pair("who", "berlin", "the city"))])
    assert batch["answer"]["input_ids"].shape == (2, 10)
    assert batch["answer"]["attention_mask"][1].sum().item() == 6


def test_text_collator_questions(tokenizer):
    collate = TextCollator(tokenizer, max_length=5, side="question")
    batch = collate([(3, "what is the capital of france"), (7, "where")])
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "index"}
    assert batch["input_ids"].shape == (2, 5)
    assert batch["index"].tolist() == [3, 7]
    short = collate([(0, "where"), (1, "who")])
    assert short["input_ids"].shape == (2, 3)  # padded to the batch's longest


def test_text_collator_candidates_with_and_without_context(tokenizer):
    cands = [Candidate("p0s0", "paris is the capital", "paris is the capital of france", "p0"),
             Candidate("p1s0", "berlin", "berlin germany", "p1")]
    plain = TextCollator(tokenizer, 32, side="answer")([(0, cands[0]), (1, cands[1])])
    assert plain["input_ids"].shape == (2, 6)
    assert plain["token_type_ids"].sum().item() == 0
    ctx = TextCollator(tokenizer, 32, side="answer", with_context=True)(
        [(5, cands[0]), (6, cands[1])])
    assert ctx["input_ids"].shape == (2, 13)  # [CLS] 4 [SEP] 6 [SEP]
    assert ctx["token_type_ids"][0].tolist() == [0] * 6 + [1] * 7
    assert ctx["index"].tolist() == [5, 6]


def test_text_collator_rejects_bad_settings(tokenizer):
    with pytest.raises(ValueError):
        TextCollator(tokenizer, 8, side="passage")
    with pytest.raises(ValueError):
        TextCollator(tokenizer, 8, side="question", with_context=True)
    with pytest.raises(TypeError):
        TextCollator(tokenizer, 8, side="answer", with_context=True)([(0, "just text")])


def test_first_copies_of_each_input():
    assert first_copies(["a", "b", "a", "c", "b"]) == [0, 1, 0, 3, 1]
    assert first_copies([]) == []
    # with contexts, the same sentence in another paragraph is another input
    assert first_copies(["a", "a", "a"], ["p", "q", "p"]) == [0, 1, 0]


def test_text_collator_carries_candidate_labels(tokenizer):
    cands = [Candidate("p0s0", "paris", "paris", "p0"), Candidate("p1s0", "paris", "paris", "p1")]
    batch = TextCollator(tokenizer, 8, side="answer")([(4, cands[0], (2, 4)), (9, cands[1], (3, 4))])
    assert batch["doc"].tolist() == [2, 3] and batch["same_as"].tolist() == [4, 4]
