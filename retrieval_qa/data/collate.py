"""Collators: tokenise a list of dataset items into padded tensors (dynamic padding).

Every batch is padded to its longest member (never to the maximum length), and truncated at
the configured maximum length. Tensors are those the tokenizer returns among
``input_ids``, ``attention_mask`` and ``token_type_ids`` (the last only for tokenizers that
make segment ids, e.g. BERT WordPiece), each ``LongTensor[B, L]``.

With ``answer_with_context`` the answer side is the pair (sentence, context) as two segments
(``[CLS] sentence [SEP] context [SEP]``, token_type_ids 0 then 1) and only the context is
truncated, as in the supervised-mining paper (96 question / 384 answer+context tokens); a
sentence that alone exceeds the maximum length is the one case truncated on both segments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .features import FeatureTable
from .tokenized import TokenizedTexts, tokenize_rows
from .types import Candidate, QAPair

MODEL_KEYS = ("input_ids", "attention_mask", "token_type_ids")


def _keep(enc) -> dict[str, torch.Tensor]:
    return {k: enc[k] for k in MODEL_KEYS if k in enc}


def token_lengths(tokenizer, texts: Sequence[str], max_length: int,
                  contexts: Sequence[str] | None = None) -> list[int]:
    """Tokens each text will take in a batch (special tokens included, capped at
    ``max_length``): the key for length-sorted batches, which waste far less padding than a
    sort by characters (word-piece counts vary a lot among sentences of equal length).
    Frozen features have no tokens: every length is 1.

    Args:
        tokenizer: a Hugging Face tokenizer, or a :class:`~.features.FeatureTable`.
        texts: the texts.
        max_length: the cap, in tokens.
        contexts: a second segment per text (its paragraph); None: none.
    """
    if isinstance(tokenizer, FeatureTable):
        return [1] * len(texts)
    ids = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
    lengths = [len(x) for x in ids]
    if contexts is not None:
        extra = tokenizer(list(contexts), add_special_tokens=False)["input_ids"]
        lengths = [min(n + len(c) + 1, max_length) for n, c in zip(lengths, extra, strict=True)]
    return lengths


def first_copies(texts: Sequence[str], contexts: Sequence[str] | None = None) -> list[int]:
    """For each input, the index of the first input with the same text (and context): the
    same encoder input, so its embedding must be the same one. Encoded apart (another batch,
    another process), copies differ in the last bits and their scores no longer tie; the
    protocol's average rank of tied candidates (the same sentence in two paragraphs) would
    then depend on how the pool was batched.

    Args:
        texts: the inputs' texts.
        contexts: their second segments; None: none.
    """
    keys = zip(texts, contexts, strict=True) if contexts is not None else texts
    first: dict = {}
    return [first.setdefault(key, i) for i, key in enumerate(keys)]


def encode_texts(tokenizer, texts: list[str], max_length: int,
                 contexts: list[str] | None = None) -> dict[str, torch.Tensor]:
    """Tokenise ``texts`` (and ``contexts``) padded to the batch's longest. Returns
    ``{key: LongTensor[B, L]}`` with L <= max_length. With a :class:`~.features.FeatureTable`
    in place of the tokenizer (frozen features): ``{"features": FloatTensor[B, D]}``.

    Args:
        tokenizer: a Hugging Face tokenizer, or a :class:`~.features.FeatureTable`.
        texts: the texts.
        max_length: the cap, in tokens.
        contexts: second segments (only they are truncated); None: none.
    """
    if isinstance(tokenizer, FeatureTable):
        return tokenizer.lookup(texts, contexts)
    if contexts is None:
        return _keep(tokenizer(texts, padding=True, truncation=True, max_length=max_length,
                               return_tensors="pt"))
    rows = tokenize_rows(tokenizer, texts, max_length, contexts)
    return _keep(tokenizer.pad(rows, padding=True, return_tensors="pt"))


class PairCollator:
    """Training batches of (question, answer sentence) pairs.

    Input: a list of ``(index, QAPair)`` or ``(index, QAPair, weight)`` items.
    Output::

        {"question": {"input_ids": LongTensor[B, Lq], "attention_mask": ..., ["token_type_ids"]},
         "answer":   {"input_ids": LongTensor[B, La], "attention_mask": ..., ["token_type_ids"]},
         "index":    LongTensor[B],                  # indices into the training pairs
         ["weight":  FloatTensor[B]]}                # only when the items carry weights

    Lq <= max_question_length, La <= max_answer_length (for sentence + context too).

    With ``tokens`` (the :class:`~.tokenized.TokenizedTexts` of the questions and of the
    answers, row ``i`` = pair ``i``, the item's index) no text is tokenised here: rows are cut
    from the ids, padded to the longest or to a multiple of ``pad_to_multiple_of``.

    Args:
        tokenizer: a Hugging Face tokenizer, or a :class:`~.features.FeatureTable`.
        max_question_length: the question side's cap, in tokens.
        max_answer_length: the answer side's cap (sentence + context), in tokens.
        answer_with_context: the answer's paragraph as its second segment.
        tokens: the pretokenised questions and answers; None: tokenise here.
        pad_to_multiple_of: with ``tokens``, pad each side's length to a multiple of it; None:
            to the longest.
    """

    def __init__(self, tokenizer, max_question_length: int, max_answer_length: int,
                 answer_with_context: bool = False,
                 tokens: tuple[TokenizedTexts, TokenizedTexts] | None = None,
                 pad_to_multiple_of: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.max_question_length = max_question_length
        self.max_answer_length = max_answer_length
        self.answer_with_context = answer_with_context
        self.tokens = tokens
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, items: Sequence[tuple]) -> dict[str, Any]:
        index = [int(it[0]) for it in items]
        if self.tokens is not None:
            questions, answers = self.tokens
            batch: dict[str, Any] = {
                "question": questions.batch(index, self.pad_to_multiple_of),
                "answer": answers.batch(index, self.pad_to_multiple_of)}
        else:
            pairs: list[QAPair] = [it[1] for it in items]
            batch = {
                "question": encode_texts(self.tokenizer, [p.question for p in pairs],
                                         self.max_question_length),
                "answer": encode_texts(self.tokenizer, [p.answer for p in pairs],
                                       self.max_answer_length,
                                       [p.context for p in pairs] if self.answer_with_context
                                       else None)}
        batch["index"] = torch.tensor(index, dtype=torch.long)
        if items and len(items[0]) > 2:
            batch["weight"] = torch.tensor([float(it[2]) for it in items], dtype=torch.float)
        return batch


class TextCollator:
    """Evaluation batches of one side (questions or candidate answers).

    Input: a list of ``(index, str)`` or ``(index, Candidate)`` items (``with_context`` on the
    answer side needs Candidates: sentence + context as two segments), optionally with a
    label as third element: the question's gold candidate indices, the candidate's
    ``(document number, first copy)`` (:func:`first_copies`; the labels travel with the
    evaluation data).
    Output: ``{"input_ids": LongTensor[B, L], "attention_mask": ..., ["token_type_ids"],
    "index": LongTensor[B]}`` with L <= max_length, plus ``"gold"`` (list of index lists) on
    the question side or ``"doc"`` and ``"same_as"`` (LongTensor[B] each) on the answer side
    when items carry labels; ``index`` is the item's index into ``pool.questions`` /
    ``pool.candidates`` so shards can be reassembled. With ``tokens`` (the
    :class:`~.tokenized.TokenizedTexts` of the whole list the indices point into) rows are
    cut from the ids instead of tokenising.

    Args:
        tokenizer: a Hugging Face tokenizer, or a :class:`~.features.FeatureTable`.
        max_length: the cap, in tokens.
        side: ``question`` or ``answer``.
        with_context: the candidate's paragraph as its second segment (answer side only).
        tokens: the pretokenised texts; None: tokenise here.
        pad_to_multiple_of: with ``tokens``, pad the length to a multiple of it; None: to the
            longest.
    """

    def __init__(self, tokenizer, max_length: int, side: str = "question",
                 with_context: bool = False, tokens: TokenizedTexts | None = None,
                 pad_to_multiple_of: int | None = None) -> None:
        if side not in ("question", "answer"):
            raise ValueError(f"side must be 'question' or 'answer', got {side!r}")
        if with_context and side != "answer":
            raise ValueError("with_context applies to the answer side only")
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.side = side
        self.with_context = with_context
        self.tokens = tokens
        self.pad_to_multiple_of = pad_to_multiple_of

    def _encode(self, items: Sequence[tuple]) -> dict[str, Any]:
        if self.tokens is not None:
            return self.tokens.batch([int(it[0]) for it in items], self.pad_to_multiple_of)
        values = [it[1] for it in items]
        texts = [v.text if isinstance(v, Candidate) else v for v in values]
        contexts = None
        if self.with_context:
            if not all(isinstance(v, Candidate) for v in values):
                raise TypeError("TextCollator(with_context=True) needs (index, Candidate) items")
            contexts = [v.context for v in values]
        return encode_texts(self.tokenizer, texts, self.max_length, contexts)

    def __call__(self, items: Sequence[tuple[int, str | Candidate]]) -> dict[str, Any]:
        batch = self._encode(items)
        batch["index"] = torch.tensor([int(it[0]) for it in items], dtype=torch.long)
        if items and len(items[0]) > 2:
            labels = [it[2] for it in items]
            if self.side == "question":
                batch["gold"] = [list(g) for g in labels]
            else:
                batch["doc"], batch["same_as"] = torch.tensor(labels, dtype=torch.long).T
        return batch
