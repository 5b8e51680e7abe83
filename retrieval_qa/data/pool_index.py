"""Integer indexes of a retrieval pool that rankers, batch labels and negative samplers share."""

from __future__ import annotations

import torch

from .types import RetrievalPool


def doc_index(pool: RetrievalPool) -> tuple[torch.Tensor, int]:
    """[C] long: each candidate's document (paragraph) as an integer, and the number of
    documents; what doc-level ranking needs from a pool.

    Args:
        pool: the pool.
    """
    doc_names = sorted({c.doc_id for c in pool.candidates})
    doc_pos = {d: i for i, d in enumerate(doc_names)}
    return (torch.tensor([doc_pos[c.doc_id] for c in pool.candidates], dtype=torch.long),
            len(doc_names))


def known_positives(pool: RetrievalPool) -> list[set[int]]:
    """For each question unit of ``pool``: the candidate indices whose text is a gold answer
    of its question string (its own gold, copies of those sentences in other paragraphs,
    and the gold of other units with the same string).

    Args:
        pool: the pool.
    """
    by_text: dict[str, list[int]] = {}
    for i, c in enumerate(pool.candidates):
        by_text.setdefault(c.text, []).append(i)
    answers_of: dict[str, set[str]] = {}
    for p in pool.pairs:
        answers_of.setdefault(p.question, set()).add(p.answer)
    out = []
    for question, gold in zip(pool.questions, pool.gold, strict=True):
        found = set(gold)
        for text in answers_of.get(question, ()):
            found.update(by_text.get(text, ()))
        for g in gold:
            found.update(by_text.get(pool.candidates[g].text, ()))
        out.append(found)
    return out
