"""SQuAD paragraph retrieval (residual-embedding paper, section 4.1, Table 1): every question
of a SQuAD file against every paragraph of that file; a question's gold is the paragraph it
was asked about. Paragraphs are kept one per SQuAD paragraph record (not deduplicated on
text) and questions one per question id, so the counts are the paper's: dev 10,570
questions / 2,067 paragraphs, train 87,599 / 18,896."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import did_you_mean
from .io import file_sha256
from .sources import resolve_data_dir, source_files
from .squad import SquadParagraph, read_squad

DATASET = "squad_paragraphs"
POOLS = ("dev", "train")


@dataclass
class ParagraphTask:
    """The paragraph task of a SQuAD file: every question against every paragraph.

    Attributes:
        pool: the pool's name.
        questions: the question texts.
        question_ids: their ids.
        paragraphs: the paragraph texts.
        gold: per question, its paragraph (index into ``paragraphs``).
        source: the file read.
        source_sha256: its sha256.
        notes: build notes (records skipped).
    """
    pool: str
    questions: list[str]
    question_ids: list[str]
    paragraphs: list[str]
    gold: list[int]               # index into ``paragraphs`` for every question
    source: str = ""
    source_sha256: str = ""
    notes: dict = field(default_factory=dict)

    def stats(self) -> dict:
        return {"dataset": DATASET, "pool": self.pool, "questions": len(self.questions),
                "paragraphs": len(self.paragraphs),
                "distinct_paragraph_texts": len(set(self.paragraphs)),
                "source": self.source}


def build_paragraph_task(paragraphs: list[SquadParagraph], pool: str, source: str = "",
                         source_sha256: str = "") -> ParagraphTask:
    """The task of parsed SQuAD paragraphs: each question's gold is its own paragraph.

    Args:
        paragraphs: the paragraphs (:func:`~.squad.read_squad`).
        pool: the pool's name.
        source: the file read.
        source_sha256: its sha256.
    """
    questions, qids, texts, gold = [], [], [], []
    for para in paragraphs:
        for qa in para.qas:
            questions.append(qa.question)
            qids.append(qa.id)
            gold.append(len(texts))
        texts.append(para.context)
    return ParagraphTask(pool, questions, qids, texts, gold, source, source_sha256)


def load_paragraph_task(pool: str = "dev", data_dir: str | Path | None = None,
                        strict: bool = True) -> ParagraphTask:
    """The task on ``squad/<pool>-v1.1.json(.gz)`` of the data directory (same lookup as
    ``reqa_squad``).

    Args:
        pool: ``dev`` or ``train``.
        data_dir: the data folder; None: :func:`~.sources.resolve_data_dir`'s.
        strict: a malformed record is an error; False: it is skipped and counted in the notes.
    """
    if pool not in POOLS:
        raise ValueError(f"pool {pool!r} is not one of {POOLS} for {DATASET} (fix: "
                         f"{did_you_mean(pool, POOLS)}give one of them)")
    path = source_files("reqa_squad", pool, resolve_data_dir(data_dir)).paths[0]
    paragraphs, report = read_squad(path, strict)
    task = build_paragraph_task(paragraphs, pool, str(path), file_sha256(path))
    task.notes["skipped_records"] = report.summary()
    return task
