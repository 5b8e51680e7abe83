"""SSE of Cross-VAEs Table 3: how close the questions of one answer lie to each other.

Paper: "SSE indicates the sum of squared distances/errors between two different questions
aligned to same answer", reported on the subset of SQuAD "in which any answer has more than 8
questions" (BERTQA 0.23, USE-QA 0.14, Cross-VAEs 0.09). The values are below 1, so they
cannot be a plain sum over the thousands of pairs of that subset; we read them as an average
over pairs, of embeddings on the unit sphere:

    SSE = mean over pairs {i, j} of ||e_i / |e_i| - e_j / |e_j| ||^2      (= 2 - 2 cos)

where the pairs are the unordered pairs of **different** questions that share at least one
gold answer among the answers with at least ``min_questions`` (default 9: "more than 8")
distinct questions. Each such pair counts once (also when two questions share two answers).
Options: ``normalize=False`` (raw embeddings), ``average="answer"`` (the mean pair distance
of each answer, averaged over answers: every answer counts equally, instead of every pair,
which weighs an answer with n questions by n(n-1)/2), ``average="sum"`` (the literal sum).

Answers and questions are counted in the pool's units (as :func:`retrieval_qa.data.subsets.
one_to_many_subset` does): for ReQA an answer is a sentence text (every copy of it is gold),
for MultiReQA a candidate id; see :func:`pool_answer_keys`.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..data.types import QUESTION_TEXT, RetrievalPool

AVERAGES = ("pair", "answer", "sum")
PAPER_MIN_QUESTIONS = 9  # Table 3: answers with more than 8 questions

__all__ = [
    "AVERAGES",
    "PAPER_MIN_QUESTIONS",
    "SSEStats",
    "answer_groups",
    "pool_answer_keys",
    "pool_sse",
    "question_sse",
    "sse_stats",
]


@dataclass(frozen=True)
class SSEStats:
    """An SSE and the counts behind it (:func:`sse_stats`).

    Attributes:
        value: the SSE (nan when no answer qualifies).
        answers: answers with at least ``min_questions`` questions.
        questions: distinct questions in them.
        pairs: distinct question pairs averaged over (``average="pair"`` / ``"sum"``).
    """
    value: float      # the SSE (nan when no answer qualifies)
    answers: int      # answers with at least min_questions questions
    questions: int    # distinct questions in them
    pairs: int        # distinct question pairs averaged over (average="pair"/"sum")


def _keys(key) -> Collection[Hashable]:
    if isinstance(key, (str, bytes)) or not isinstance(key, Collection):
        return (key,)
    return key


def answer_groups(answer_keys: Sequence, min_questions: int = PAPER_MIN_QUESTIONS
                  ) -> dict[Hashable, list[int]]:
    """``{answer key: sorted question rows}`` for the answers with at least ``min_questions``
    questions.

    Args:
        answer_keys: question i's gold-answer key, or a collection of keys when it has several
            gold answers.
        min_questions: the fewest questions an answer needs (>= 2).
    """
    if min_questions < 2:
        raise ValueError(f"min_questions must be >= 2 (a pair needs two questions), got "
                         f"{min_questions}")
    groups: dict[Hashable, set[int]] = {}
    for row, key in enumerate(answer_keys):
        for k in _keys(key):
            groups.setdefault(k, set()).add(row)
    return {k: sorted(rows) for k, rows in groups.items() if len(rows) >= min_questions}


def sse_stats(embeddings: torch.Tensor, answer_keys: Sequence,
              min_questions: int = PAPER_MIN_QUESTIONS, normalize: bool = True,
              average: str = "pair") -> SSEStats:
    """The SSE with the counts behind it (see the module docstring).

    Args:
        embeddings: ``[Q, D]``, row i the embedding of question i.
        answer_keys: per question its gold-answer key (or a collection of keys).
        min_questions: the fewest questions an answer needs (>= 2; default 9: "more than 8").
        normalize: scale the embeddings to unit length first.
        average: ``pair``, ``answer`` or ``sum`` (module docstring).
    """
    if average not in AVERAGES:
        raise ValueError(f"average={average!r}; expected one of {list(AVERAGES)}")
    if embeddings.dim() != 2 or embeddings.shape[0] != len(answer_keys):
        raise ValueError(f"embeddings must be [Q, D] with Q = {len(answer_keys)} "
                         f"(one answer key per question), got {tuple(embeddings.shape)}")
    emb = embeddings.detach().double()
    if normalize:
        emb = F.normalize(emb, dim=-1)
    groups = answer_groups(answer_keys, min_questions)
    questions = sorted({r for rows in groups.values() for r in rows})
    if not groups:
        return SSEStats(float("nan"), 0, 0, 0)
    per_answer: list[float] = []
    distances: dict[tuple[int, int], float] = {}
    for rows in groups.values():
        idx = torch.tensor(rows)
        vectors = emb[idx]
        squared = torch.cdist(vectors, vectors).pow(2)
        upper = torch.triu_indices(len(rows), len(rows), offset=1)
        values = squared[upper[0], upper[1]]
        per_answer.append(float(values.mean()))
        for a, b, v in zip(idx[upper[0]].tolist(), idx[upper[1]].tolist(), values.tolist(),
                           strict=True):
            distances[(a, b)] = v
    if average == "answer":
        value = sum(per_answer) / len(per_answer)
    else:
        total = sum(distances.values())
        value = total if average == "sum" else total / len(distances)
    return SSEStats(value, len(groups), len(questions), len(distances))


def question_sse(embeddings: torch.Tensor, answer_keys: Sequence,
                 min_questions: int = PAPER_MIN_QUESTIONS, normalize: bool = True,
                 average: str = "pair") -> float:
    """The SSE of Table 3 (module docstring): :func:`sse_stats`'s value.

    Args:
        embeddings: ``[Q, D]``, row i the embedding of question i.
        answer_keys: per question its gold-answer key (or a collection of keys).
        min_questions: the fewest questions an answer needs (>= 2).
        normalize: scale the embeddings to unit length first.
        average: ``pair``, ``answer`` or ``sum`` (module docstring).
    """
    return sse_stats(embeddings, answer_keys, min_questions, normalize, average).value


def pool_answer_keys(pool: RetrievalPool) -> list[frozenset]:
    """Per question of ``pool``, the keys of its gold answers: the sentence texts of its gold
    candidates (ReQA, where every copy of the text is gold), or their ids (MultiReQA).

    Args:
        pool: the pool.
    """
    by_id = pool.question_unit != QUESTION_TEXT
    return [frozenset(pool.candidates[c].id if by_id else pool.candidates[c].text for c in gold)
            for gold in pool.gold]


def pool_sse(question_embeddings: torch.Tensor, pool: RetrievalPool,
             min_questions_per_answer: int = PAPER_MIN_QUESTIONS, normalize: bool = True,
             average: str = "pair") -> SSEStats:
    """The SSE over ``pool``'s questions, its answers keyed by :func:`pool_answer_keys`.

    Args:
        question_embeddings: ``[Q, D]``, row i the embedding of ``pool.questions[i]``.
        pool: the pool.
        min_questions_per_answer: the fewest questions an answer needs (>= 2).
        normalize: scale the embeddings to unit length first.
        average: ``pair``, ``answer`` or ``sum`` (module docstring).
    """
    return sse_stats(question_embeddings, pool_answer_keys(pool), min_questions_per_answer,
                     normalize, average)
