"""The classifier's training data (supervised-mining paper, section 4.1).

For every question of a pool: its gold pairs as positives (label 1) and three negatives
(label 0), one from each source, so the sources stand 1:1:1:

* ``bm25``: a sentence drawn from the question's BM25 top 10 over the pool's sentences;
* ``dense``: a sentence drawn from the top 10 of a dual encoder of the suite (the paper:
  USE-QA) over the same sentences;
* ``same_document``: a sentence drawn from the paragraph of the question's gold sentence.

A sentence that is a known positive of the question
(:func:`~retrieval_qa.data.pool_index.known_positives`: its text answers that question string
anywhere in the pool) is never a negative, and the three negatives of a question are three
different sentence texts. A source with nothing left to give (every top-10 sentence a
positive or already taken, a one-sentence paragraph) gives no negative for that question:
counted in ``shortfall``, never filled from another source, so the ratio stays what the
sources gave.

The 10 % dev split keeps whole question groups on one side
(:func:`~retrieval_qa.data.split.train_val_split`: no question string or answer sentence on
both sides).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..data.split import train_val_split
from ..data.types import RetrievalPool
from .examples import ClassifierExample

NEGATIVE_SOURCES = ("bm25", "dense", "same_document")


@dataclass
class SampledExamples:
    """What :func:`sample_examples` gives.

    Attributes:
        examples: the positives and negatives, question by question.
        shortfall: per negative source, the questions it gave no negative.
    """

    examples: list[ClassifierExample]
    shortfall: dict[str, int] = field(default_factory=lambda: dict.fromkeys(NEGATIVE_SOURCES, 0))


def sample_examples(pool: RetrievalPool, positives: Sequence[set[int]],
                    bm25: Sequence[Sequence[tuple[int, float]]],
                    dense: Sequence[Sequence[tuple[int, float]]], seed: int,
                    dense_score=None, questions: Sequence[int] | None = None
                    ) -> SampledExamples:
    """Positives and the three negatives of each question unit ``i`` of ``pool`` (see the
    module docstring).

    Args:
        pool: the pool.
        positives: ``positives[i]``, candidate indices never to use as negatives.
        bm25: ``bm25[i]``, the (candidate, score) BM25 neighbours to draw from (positives
            already removed, or removed here).
        dense: ``dense[i]``, the dense retriever's neighbours, the same way.
        seed: the seed of the draws.
        dense_score: ``dense_score(i, candidate) -> float``, the dense retriever's
            similarity, stored with each example (the dual-encoder baseline); None: NaN.
        questions: the question units sampled; None: all.
    """
    rng = random.Random(seed)
    doc_members: dict[str, list[int]] = {}
    for c, cand in enumerate(pool.candidates):
        doc_members.setdefault(cand.doc_id, []).append(c)
    index_of = {c.id: i for i, c in enumerate(pool.candidates)}
    pairs_of: dict[str, list] = {}
    for p in pool.pairs:
        pairs_of.setdefault(pool.pair_key(p), []).append(p)
    keys = pool.question_keys
    out = SampledExamples([])
    score = dense_score or (lambda i, c: float("nan"))
    for i in (questions if questions is not None else range(len(pool.questions))):
        question, key = pool.questions[i], keys[i]
        gold_pairs = pairs_of.get(key, [])
        for p in gold_pairs:
            c = index_of[p.answer_id]
            out.examples.append(ClassifierExample(question, p.answer, p.context, 1, "gold", key,
                                                  p.answer_id, score(i, c)))
        taken_texts = {pool.candidates[c].text for c in positives[i]}
        gold_docs = list(dict.fromkeys(pool.candidates[g].doc_id for g in pool.gold[i]))
        same_doc = [c for d in gold_docs for c in doc_members[d]]
        for source, options in (("bm25", [c for c, _ in bm25[i]]),
                                ("dense", [c for c, _ in dense[i]]),
                                ("same_document", same_doc)):
            free = [c for c in options if c not in positives[i]
                    and pool.candidates[c].text not in taken_texts]
            if not free:
                out.shortfall[source] += 1
                continue
            c = rng.choice(free)
            cand = pool.candidates[c]
            taken_texts.add(cand.text)
            out.examples.append(ClassifierExample(question, cand.text, cand.context, 0, source,
                                                  key, cand.id, score(i, c)))
    return out


def dev_questions(pool: RetrievalPool, fraction: float, seed: int) -> set[str]:
    """The question keys of the dev side of a leak-free split (``fraction`` of the QA
    inputs, whole groups sharing a question string or an answer sentence).

    Args:
        pool: the pool split.
        fraction: the dev side's share of the QA inputs.
        seed: the split's seed.
    """
    _, dev = train_val_split(pool, fraction, seed)
    return set(dev.question_keys)
