"""The text a cross-encoder reads for a candidate sentence.

``reads`` names it:

* ``sentence``: the sentence alone (every reranker before this setting existed);
* ``sentence_and_paragraph``: the sentence, the tokenizer's separator, then its whole paragraph
  (the sentence in place), so that the model sees what the sentence's pronouns and elisions
  refer to. A sentence that is its whole paragraph is read alone: the paragraph adds nothing.

The tokenizer's ``longest_first`` truncation cuts the paragraph's end first, so the sentence
and the question survive a ``max_length`` that the paragraph overruns.
"""

from __future__ import annotations

__all__ = ["READS", "candidate_text", "check_reads"]

READS = ("sentence", "sentence_and_paragraph")


def check_reads(reads: str) -> str:
    """``reads`` when it is one of :data:`READS`, else a ValueError naming them.

    Args:
        reads: what a model reads for a candidate (``sentence`` | ``sentence_and_paragraph``).
    """
    if reads not in READS:
        raise ValueError(f"reads={reads!r} is not one of {list(READS)} (fix: sentence: the "
                         "sentence alone, sentence_and_paragraph: the sentence, then its "
                         "paragraph)")
    return reads


def candidate_text(sentence: str, paragraph: str, reads: str, separator: str) -> str:
    """What a model of this ``reads`` reads for ``sentence`` of ``paragraph``.

    Args:
        sentence: the candidate sentence.
        paragraph: its paragraph (the sentence in place).
        reads: ``sentence`` or ``sentence_and_paragraph`` (:func:`check_reads`).
        separator: the tokenizer's separator token (e.g. ``[SEP]``).

    Example:

    >>> candidate_text("It has a tower.", "Paris is big. It has a tower.",
    ...                "sentence_and_paragraph", "[SEP]")
    'It has a tower. [SEP] Paris is big. It has a tower.'
    >>> candidate_text("Paris is big.", "Paris is big.", "sentence_and_paragraph", "[SEP]")
    'Paris is big.'
    >>> candidate_text("It has a tower.", "Paris is big. It has a tower.", "sentence", "[SEP]")
    'It has a tower.'
    """
    if check_reads(reads) == "sentence" or paragraph.strip() in ("", sentence.strip()):
        return sentence
    return f"{sentence} {separator} {paragraph}"
