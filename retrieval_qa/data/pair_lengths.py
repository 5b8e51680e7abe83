"""Lengths of training pairs for the length buckets of the batch sampler: the tokenizer's
counts, or characters / 4 (``data.bucket_unit``)."""

from __future__ import annotations

from collections.abc import Sequence

from .collate import token_lengths
from .types import QAPair

BUCKET_UNITS = ("tokens", "chars")
CHARS_PER_TOKEN = 4  # rough WordPiece rate on English prose; only orders pairs for bucketing


def estimated_tokens(text: str, cap: int) -> int:
    """A cheap token-count estimate (characters / 4, at most ``cap``) for length bucketing.

    Args:
        text: the text.
        cap: the most tokens.
    """
    return min(cap, len(text) // CHARS_PER_TOKEN + 1)


def pair_lengths(pairs: Sequence[QAPair], tokenizer, max_question_length: int,
                 max_answer_length: int, unit: str = "tokens",
                 with_context: bool = False) -> list[int]:
    """Question + answer(+context) tokens of each pair, each side capped at its maximum
    length (what the padded batch will hold), the key of the length buckets.

    Args:
        pairs: the training pairs.
        tokenizer: a Hugging Face tokenizer, or a :class:`~.features.FeatureTable`.
        max_question_length: the question side's cap, in tokens.
        max_answer_length: the answer side's cap, in tokens.
        unit: ``tokens`` (the tokenizer's counts) or ``chars`` (characters / 4).
        with_context: the answer side holds the paragraph too.
    """
    if unit == "tokens":
        contexts = [p.context for p in pairs] if with_context else None
        q = token_lengths(tokenizer, [p.question for p in pairs], max_question_length)
        a = token_lengths(tokenizer, [p.answer for p in pairs], max_answer_length, contexts)
        return [x + y for x, y in zip(q, a, strict=True)]
    out = []
    for p in pairs:
        answer = p.answer + " " + p.context if with_context else p.answer
        out.append(estimated_tokens(p.question, max_question_length)
                   + estimated_tokens(answer, max_answer_length))
    return out
