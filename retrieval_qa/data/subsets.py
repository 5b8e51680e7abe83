"""Sub-pools: the one-to-many subsets of the ENDX paper (Table 4, Figure 2), seeded samples of a
pool's paragraphs or questions."""

from __future__ import annotations

import random

from .types import RetrievalPool


def one_to_many_subset(pool: RetrievalPool, min_questions_per_answer: int) -> RetrievalPool:
    """Keep the questions whose answer sentence is shared by at least ``k`` distinct questions
    (questions and answers counted in the pool's units: strings and sentence texts for ReQA,
    qids and candidates for MultiReQA); the candidate pool is unchanged (the task stays just
    as hard), so only the denominator changes.

    Args:
        pool: the pool.
        min_questions_per_answer: ``k`` (>= 1).
    """
    k = min_questions_per_answer
    if k < 1:
        raise ValueError(f"min_questions_per_answer must be >= 1, got {k}")
    per_answer: dict[str, set[str]] = {}
    for p in pool.pairs:
        per_answer.setdefault(pool.answer_key(p), set()).add(pool.pair_key(p))
    keep_q = {pool.pair_key(p) for p in pool.pairs if len(per_answer[pool.answer_key(p)]) >= k}
    idx = [i for i, q in enumerate(pool.question_keys) if q in keep_q]
    return RetrievalPool(pool.dataset, f"{pool.pool}[qpa>={k}]", pool.candidates,
                         [pool.questions[i] for i in idx], [pool.gold[i] for i in idx],
                         [p for p in pool.pairs if pool.pair_key(p) in keep_q], pool.source,
                         pool.question_unit,
                         [pool.question_ids[i] for i in idx] if pool.question_ids else [])


def document_subset(pool: RetrievalPool, max_documents: int | None, seed: int) -> RetrievalPool:
    """The pool restricted to a seeded sample of ``max_documents`` paragraphs (all of them
    when None or more): their sentences as the candidates, the QA inputs whose answer is one
    of them; gold recomputed under the pool's rules. A smaller pool of the same kind (for
    CPU profiles and smoke runs of the mining pipeline); the name says it was cut.

    Args:
        pool: the pool.
        max_documents: how many paragraphs to keep; None: all.
        seed: the sample's seed.
    """
    from .reqa import reassemble

    docs = list(dict.fromkeys(c.doc_id for c in pool.candidates))
    if max_documents is None or max_documents >= len(docs):
        return pool
    kept = set(random.Random(seed).sample(docs, max_documents))
    candidates = [c for c in pool.candidates if c.doc_id in kept]
    ids = {c.id for c in candidates}
    pairs = [p for p in pool.pairs if p.answer_id in ids]
    return reassemble(pool, f"{pool.pool}[{max_documents} documents, seed {seed}]",
                      candidates, pairs)


def question_subset(pool: RetrievalPool, cap: int | None, seed: int) -> RetrievalPool:
    """``cap`` of the pool's questions drawn with ``seed`` (order kept), every candidate kept
    (the retrieval problem stays the pool's; only the questions are fewer; the pool keeps its
    name, so the run files of the whole pool serve the subset).

    Args:
        pool: the pool.
        cap: how many questions to keep; None: all.
        seed: the sample's seed.
    """
    if cap is None or cap >= len(pool.questions):
        return pool
    keep = sorted(random.Random(seed).sample(range(len(pool.questions)), cap))
    keys = {pool.question_keys[i] for i in keep}
    return RetrievalPool(pool.dataset, pool.pool, pool.candidates,
                         [pool.questions[i] for i in keep], [pool.gold[i] for i in keep],
                         [p for p in pool.pairs if pool.pair_key(p) in keys], pool.source,
                         pool.question_unit,
                         [pool.question_ids[i] for i in keep] if pool.question_ids else [])
