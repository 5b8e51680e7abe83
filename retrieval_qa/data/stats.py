"""Pool statistics in the layout of the ENDX paper's Table 1."""

from __future__ import annotations

from collections import Counter

from .types import RetrievalPool


def _distribution(counts: list[int]) -> dict:
    hist = Counter(counts)
    return {"mean": round(sum(counts) / max(len(counts), 1), 4), "max": max(counts, default=0),
            "histogram": {str(k): hist[k] for k in sorted(hist)}}


def pool_stats(pool: RetrievalPool) -> dict:
    """Counts per evaluation unit: ``questions`` counts what ``question_unit`` names (distinct
    strings for ReQA, MRQA question ids for MultiReQA); answers are sentence texts for ReQA
    and candidates for MultiReQA (its gold rule). ``candidates_per_context`` counts the
    candidates of each paragraph (``doc_id``), ``whole_context_candidates`` those whose
    sentence is their whole paragraph (for these a model that reads the paragraph beside the
    sentence is given nothing more), and ``questions_with_a_whole_context_gold`` the questions
    with such a gold sentence.

    Args:
        pool: the pool.
    """
    answers_per_question: dict[str, set[str]] = {}
    questions_per_answer: dict[str, set[str]] = {}
    whole = [c.whole_paragraph for c in pool.candidates]
    for p in pool.pairs:
        q, a = pool.pair_key(p), pool.answer_key(p)
        answers_per_question.setdefault(q, set()).add(a)
        questions_per_answer.setdefault(a, set()).add(q)
    return {
        "dataset": pool.dataset,
        "pool": pool.pool,
        "source": pool.source,
        "question_unit": pool.question_unit,
        "candidates": len(pool.candidates),
        "documents": len({c.doc_id for c in pool.candidates}),
        "candidates_per_context": _distribution(
            list(Counter(c.doc_id for c in pool.candidates).values())),
        "whole_context_candidates": sum(whole),
        "questions_with_a_whole_context_gold": sum(any(whole[i] for i in g) for g in pool.gold),
        "qa_inputs": len(pool.pairs),
        "questions": len(pool.questions),
        "distinct_question_strings": len(set(pool.questions)),
        "answer_sentences": len(questions_per_answer),
        "answers_per_question": _distribution([len(v) for v in answers_per_question.values()]),
        "questions_per_answer": _distribution([len(v) for v in questions_per_answer.values()]),
    }
