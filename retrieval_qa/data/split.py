"""Deterministic train/validation split of a training pool with no leakage across the boundary.

QA inputs that share a question text or an answer sentence are joined into one group
(union-find), and whole groups go to one side, so no question and no answer sentence is on
both sides. Groups are shuffled with the seed and taken for validation until the validation
share of QA inputs reaches ``val_fraction``.
"""

from __future__ import annotations

import random

from .reqa import reassemble
from .types import QAPair, RetrievalPool


def _groups(pairs: list[QAPair]) -> list[list[int]]:
    parent = list(range(len(pairs)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[tuple[str, str], int] = {}
    for i, p in enumerate(pairs):
        for key in (("q", p.question), ("a", p.answer)):
            j = first.setdefault(key, i)
            parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(pairs)):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def train_val_split(pool: RetrievalPool, val_fraction: float = 0.1, seed: int = 0
                    ) -> tuple[list[QAPair], RetrievalPool]:
    """Return (training pairs, validation pool). The validation pool's candidates are every
    sentence of the paragraphs that hold a validation answer (a retrieval problem of its own,
    small enough to evaluate every epoch); its questions are the validation questions, in the
    pool's question unit (strings for ReQA, qids for MultiReQA; groups always join inputs
    that share a string, so no question string is on both sides either way).

    Args:
        pool: the training pool.
        val_fraction: the share of QA inputs held out, in (0, 1).
        seed: the split's seed.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    groups = _groups(pool.pairs)
    random.Random(seed).shuffle(groups)
    target = round(val_fraction * len(pool.pairs))
    val_idx: set[int] = set()
    for g in groups:
        if len(val_idx) >= target:
            break
        val_idx.update(g)
    train = [p for i, p in enumerate(pool.pairs) if i not in val_idx]
    val = [p for i, p in enumerate(pool.pairs) if i in val_idx]
    val_docs = {p.context for p in val}
    candidates = [c for c in pool.candidates if c.context in val_docs]
    return train, reassemble(pool, f"{pool.pool}-val", candidates, val)
