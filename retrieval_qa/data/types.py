"""Plain data types shared by every reader, builder, DataModule and the evaluator."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Candidate:
    """One retrievable answer sentence.

    ``id`` is unique within a pool; ``doc_id`` names the paragraph (context) it came from, used
    by document-level metrics; ``context`` is the paragraph text (for sentence+context models).
    """

    id: str
    text: str
    context: str
    doc_id: str


@dataclass(frozen=True)
class QAPair:
    """One (question, gold answer sentence) training or evaluation input."""

    question: str
    answer: str
    context: str
    question_id: str
    answer_id: str


@dataclass
class RetrievalPool:
    """A retrieval benchmark in the evaluator's terms.

    ``questions`` are the evaluation units (for ReQA: distinct question strings, the metric
    denominator); ``gold[i]`` lists the indices into ``candidates`` that count as correct for
    ``questions[i]``; ``pairs`` are the QA inputs (one per question and distinct answer
    sentence), which are also the training pairs when the pool is a training file.
    """

    dataset: str
    pool: str
    candidates: list[Candidate]
    questions: list[str]
    gold: list[list[int]]
    pairs: list[QAPair] = field(default_factory=list)
    source: str = ""

    def __post_init__(self) -> None:
        if len(self.questions) != len(self.gold):
            raise ValueError(
                f"{self.dataset}/{self.pool}: {len(self.questions)} questions but "
                f"{len(self.gold)} gold lists"
            )
