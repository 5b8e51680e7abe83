"""Deterministic caps of the reduced profiles: a seeded subset of the training pairs
(``data.max_train_pairs``) and of the validation questions (``data.max_val_questions``)."""

from __future__ import annotations

import random

from .reqa import reassemble
from .types import QAPair, RetrievalPool


def cap_pairs(pairs: list[QAPair], cap: int | None, seed: int) -> list[QAPair]:
    """A deterministic subset of ``cap`` pairs (original order kept), or all when uncapped.

    Args:
        pairs: the training pairs.
        cap: how many to keep; None: all.
        seed: the sample's seed.
    """
    if cap is None or cap >= len(pairs):
        return pairs
    keep = sorted(random.Random(seed).sample(range(len(pairs)), cap))
    return [pairs[i] for i in keep]


def cap_questions(pool: RetrievalPool, cap: int | None, seed: int) -> RetrievalPool:
    """The pool restricted to a deterministic subset of ``cap`` questions and to the sentences
    of the paragraphs that hold their answers (a smaller retrieval problem of the same kind,
    cheap enough to evaluate every epoch on a CPU); gold is recomputed on that candidate set.

    Args:
        pool: the pool.
        cap: how many questions to keep; None: all.
        seed: the sample's seed.
    """
    if cap is None or cap >= len(pool.questions):
        return pool
    keys = pool.question_keys  # strings (ReQA) or qids (MultiReQA): duplicates stay apart
    kept = {keys[i] for i in random.Random(seed).sample(range(len(keys)), cap)}
    pairs = [p for p in pool.pairs if pool.pair_key(p) in kept]
    contexts = {p.context for p in pairs}
    candidates = [c for c in pool.candidates if c.context in contexts]
    return reassemble(pool, pool.pool, candidates, pairs)
