"""Where a difference between two runs lies: wins / ties / losses of B over A and both MRRs
per group of questions (question type, answer length), from their per-question records
(:mod:`retrieval_qa.evaluation.per_question`); paired as :mod:`.compare` pairs them."""

from __future__ import annotations

import numpy as np

from ..evaluation.per_question import PerQuestion
from .compare import Setting, _check_paired

QUESTION_WORDS = ("what", "who", "when", "where", "which", "how", "why")
ANSWER_BINS = (10, 20, 30, 40)  # answer-sentence words: <=10, 11-20, ..., >40


def question_type(word: str) -> str:
    """The question's first word when it is a wh-word (or how), else "other".

    Args:
        word: the question's first word, lower-cased.
    """
    return word if word in QUESTION_WORDS else "other"


def answer_bin(words: int, bins=ANSWER_BINS) -> str:
    """The length bin of an answer sentence of ``words`` words (``1-10``, ..., ``>40``).

    Args:
        words: the answer sentence's words.
        bins: the bins' upper bounds, ascending.

    Example:

        >>> [answer_bin(n) for n in (3, 10, 11, 41)]
        ['1-10', '1-10', '11-20', '>40']
    """
    lo = 0
    for hi in bins:
        if words <= hi:
            return f"{lo + 1}-{hi}"
        lo = hi
    return f">{bins[-1]}"


def breakdown(a: PerQuestion, b: PerQuestion, by: str) -> list[dict]:
    """Wins / ties / losses of B over A on the reciprocal rank, and both MRRs, per group of
    questions.

    Args:
        a: the baseline's per-question record.
        b: the other one, of the same questions.
        by: ``qword`` (question type, :func:`question_type`) or ``answer_words`` (answer
            length bins, :func:`answer_bin`); the records need that column.
    """
    _check_paired([Setting("A", [a]), Setting("B", [b])])
    source = a if by in a.extra else b
    if by not in source.extra:
        raise ValueError(f"{a.path}: no {by!r} column (per-question records of "
                         "`rqa evaluate` / `rqa train` carry it; run files carry qword only)")
    group = question_type if by == "qword" else answer_bin
    keys = [group(v) for v in source.extra[by]]
    rr_a, rr_b = 100.0 / a.ranks, 100.0 / b.ranks
    order = (list(QUESTION_WORDS) + ["other"] if by == "qword" else
             [answer_bin(h) for h in ANSWER_BINS] + [answer_bin(ANSWER_BINS[-1] + 1)])
    keys_arr = np.array(keys)
    rows = []
    for g in order:
        m = keys_arr == g
        if not m.any():
            continue
        d = rr_b[m] - rr_a[m]
        rows.append({"group": g, "questions": int(m.sum()), "wins": int((d > 1e-9).sum()),
                     "ties": int((np.abs(d) <= 1e-9).sum()), "losses": int((d < -1e-9).sum()),
                     "mrr_a": float(rr_a[m].mean()), "mrr_b": float(rr_b[m].mean()),
                     "diff": float(d.mean())})
    return rows
