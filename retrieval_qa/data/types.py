"""Plain data types shared by every reader, builder, DataModule and the evaluator."""

from __future__ import annotations

from dataclasses import dataclass, field

QUESTION_TEXT = "question_text"  # ReQA: a question is a distinct question string
MRQA_QID = "mrqa_qid"            # MultiReQA: a question is an MRQA question id
QUESTION_ID = "question_id"      # a user's own collection: a question is a query id
QUESTION_UNITS = (QUESTION_TEXT, MRQA_QID, QUESTION_ID)


def unit_by_id(question_unit: str) -> bool:
    """Whether a question unit is an id (``mrqa_qid``, ``question_id``), whose gold is per
    candidate, rather than the question text (``question_text``).

    Args:
        question_unit: one of :data:`QUESTION_UNITS`.

    Example:

        >>> unit_by_id("question_text"), unit_by_id("question_id")
        (False, True)
    """
    return question_unit != QUESTION_TEXT


@dataclass(frozen=True)
class Candidate:
    """One retrievable answer sentence.

    ``id`` is unique within a pool; ``doc_id`` names the paragraph (context) it came from, used
    by document-level metrics; ``context`` is the paragraph text (for sentence+context models).

    Args:
        id: the candidate's id, unique within its pool.
        text: the sentence.
        context: its paragraph's text.
        doc_id: its paragraph's id.

    Example:

        >>> Candidate("c0", "Paris is in France.", "Paris is in France. It is big.", "p0").doc_id
        'p0'
    """

    id: str
    text: str
    context: str
    doc_id: str

    @property
    def whole_paragraph(self) -> bool:
        """Whether the sentence is its whole paragraph (a paragraph reader reads nothing more)."""
        return self.text.strip() == self.context.strip()


@dataclass(frozen=True)
class QAPair:
    """One (question, gold answer sentence) training or evaluation input.

    Args:
        question: the question text.
        answer: the gold answer sentence.
        context: the sentence's paragraph.
        question_id: the question's id (the MRQA qid in MultiReQA).
        answer_id: the answer candidate's id.

    Example:

        >>> QAPair("Where is Paris?", "Paris is in France.", "", "q0", "c0").answer_id
        'c0'
    """

    question: str
    answer: str
    context: str
    question_id: str
    answer_id: str


@dataclass
class RetrievalPool:
    """A retrieval benchmark in the evaluator's terms.

    ``questions`` are the texts of the evaluation units, the metric denominator; what a unit
    is says ``question_unit``: ``"question_text"`` (ReQA: one per distinct question string),
    ``"mrqa_qid"`` (MultiReQA: one per MRQA question id, so two units can share a string;
    ``question_ids[i]`` is then the qid of ``questions[i]``) or ``"question_id"`` (a user's
    own collection, :mod:`.collection`: one per query id, as for MultiReQA). With an id unit
    gold is per candidate (its ids), with the text unit every copy of a gold sentence. ``gold[i]`` lists the indices
    into ``candidates`` that count as correct for unit ``i``; ``pairs`` are the QA inputs
    (one per question and distinct answer sentence), which are also the training pairs when
    the pool is a training file.

    Args:
        dataset: the dataset's name (e.g. ``reqa_squad``).
        pool: the pool's name (``dev``, ``test``, ``train``).
        candidates: the retrievable sentences.
        questions: the evaluation units' texts.
        gold: ``gold[i]``, the indices into ``candidates`` correct for unit ``i``.
        pairs: the QA inputs; default: none.
        source: the files it was built from.
        question_unit: ``"question_text"``, ``"mrqa_qid"`` or ``"question_id"``.
        question_ids: each unit's id (required with an id unit).

    Example:

        >>> pool = RetrievalPool("toy", "dev", [Candidate("c0", "Paris is in France.", "",
        ...                                               "p0")],
        ...                      questions=["Where is Paris?"], gold=[[0]])
        >>> pool.question_keys
        ['Where is Paris?']
    """

    dataset: str
    pool: str
    candidates: list[Candidate]
    questions: list[str]
    gold: list[list[int]]
    pairs: list[QAPair] = field(default_factory=list)
    source: str = ""
    question_unit: str = QUESTION_TEXT
    question_ids: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.questions) != len(self.gold):
            raise ValueError(
                f"{self.dataset}/{self.pool}: {len(self.questions)} questions but "
                f"{len(self.gold)} gold lists"
            )
        if self.question_unit not in QUESTION_UNITS:
            raise ValueError(f"{self.dataset}/{self.pool}: question_unit "
                             f"{self.question_unit!r} is not one of {QUESTION_UNITS}")
        if self.by_id and len(self.question_ids) != len(self.questions):
            raise ValueError(f"{self.dataset}/{self.pool}: {len(self.questions)} questions but "
                             f"{len(self.question_ids)} question ids (unit "
                             f"{self.question_unit})")

    @property
    def by_id(self) -> bool:
        """Whether a unit is an id (``mrqa_qid``, ``question_id``: gold per candidate), not a
        question string (``question_text``: every copy of a gold sentence is gold)."""
        return unit_by_id(self.question_unit)

    @property
    def question_keys(self) -> list[str]:
        """What identifies each unit: its id (``mrqa_qid``, ``question_id``) or its text
        (``question_text``)."""
        return self.question_ids if self.by_id else self.questions

    def pair_key(self, pair: QAPair) -> str:
        """The unit a QA input belongs to."""
        return pair.question_id if self.by_id else pair.question

    def answer_key(self, pair: QAPair) -> str:
        """What identifies a QA input's answer: its candidate id where gold is per candidate
        (MultiReQA, a collection), its sentence text where every copy of the text is gold
        (ReQA)."""
        return pair.answer_id if self.by_id else pair.answer
