"""The training questions of the distillation and the sentences their lists come from.

Questions: the training side of the training file (the data module's 9:1 split, so never a
validation question, nor a test pool's), less every question the teacher was trained on.
The reranker's training drew its questions with
:func:`~retrieval_qa.pipeline.tuning.question_subset` over the same training side
(:func:`~retrieval_qa.classifiers.reranker_data.training_side`) with the ``questions`` and
``seed`` its ``training.json`` records; the same draw is made again here and every question
with one of those texts is left out. ``count`` of the remaining questions are then drawn
with ``seed`` (all with null).

Candidates (what the first stage retrieves from): the training side's sentences less every
validation answer sentence (a paragraph can hold both sides' answers), so no validation
answer appears in a training list.
"""

from __future__ import annotations

from pathlib import Path

from ..classifiers.reranker_data import training_side
from ..data.reqa import reassemble
from ..data.subsets import question_subset
from ..data.types import RetrievalPool
from ..errors import InputFileError, UsageError
from ..written import read_json_or_refuse

#: the record the reranker's training writes into its export folder
#: (retrieval_qa/classifiers/train_reranker.py)
RECORD = "training.json"
#: its settings that decide which questions it trained on
DRAW_KEYS = ("dataset", "pool", "val_fraction", "split_seed", "questions", "seed")


def reranker_draw(folder: str | Path) -> dict:
    """The settings of the teacher's question draw (:data:`DRAW_KEYS`), read from its
    ``training.json``.

    Args:
        folder: the teacher's export folder (written by
            ``python -m retrieval_qa.classifiers.train_reranker``).
    """
    path = Path(folder) / RECORD
    fix = ("give the folder written by python -m retrieval_qa.classifiers.train_reranker (its "
           f"{RECORD} records which training questions it saw, which the distillation "
           "leaves out)")
    if not path.is_file():
        raise InputFileError("teacher", path, "missing", fix)
    settings = read_json_or_refuse(path, "teacher record", fix, ("settings",))["settings"]
    missing = [k for k in DRAW_KEYS if k not in (settings or {})]
    if missing:
        raise InputFileError("teacher", path, f"its settings have no {missing}", fix)
    return {k: settings[k] for k in DRAW_KEYS}


def check_same_side(draw: dict, data: dict) -> None:
    """The teacher must have drawn from the training side that the student's data module
    splits off: the same file and split; else a :class:`~retrieval_qa.errors.UsageError`.

    Args:
        draw: the teacher's draw (:func:`reranker_draw`).
        data: the student's data block (``train_dataset``, ``train_pool``, ``val_fraction``,
            ``split_seed``).
    """
    ours = {"dataset": data["train_dataset"], "pool": data["train_pool"],
            "val_fraction": data["val_fraction"], "split_seed": data["split_seed"]}
    differ = {k: (draw[k], v) for k, v in ours.items() if draw[k] != v}
    if differ:
        raise UsageError(
            "the teacher was trained on another training side than data.* splits off: "
            + ", ".join(f"{k} {a!r} (teacher) vs {b!r} (data)" for k, (a, b) in differ.items())
            + " (fix: give the data settings the teacher was trained with, or a teacher "
            "trained on this split)")


def reranker_pool(full: RetrievalPool, draw: dict) -> RetrievalPool:
    """The questions the reranker trained on, with their gold sentences: its draw
    (:func:`reranker_draw`) made again over ``full``, the pool of its training file.

    Args:
        full: the pool of the reranker's training file.
        draw: the reranker's draw (:func:`reranker_draw`).
    """
    side, _ = training_side(full, draw["val_fraction"], draw["split_seed"])
    return question_subset(side, draw["questions"], draw["seed"])


def reranker_questions(full: RetrievalPool, draw: dict) -> set[str]:
    """The question texts the reranker trained on (:func:`reranker_pool`).

    Args:
        full: the pool of the reranker's training file.
        draw: the reranker's draw (:func:`reranker_draw`).
    """
    return set(reranker_pool(full, draw).questions)


def distill_pool(full: RetrievalPool, val_fraction: float, split_seed: int,
                 excluded: set[str], count: int | None, seed: int
                 ) -> tuple[RetrievalPool, dict]:
    """The distillation questions and their candidates (see the module docstring), as a pool
    named ``<pool>-distill``; with the counts of what was left out.

    Args:
        full: the training file's pool.
        val_fraction: the data module's validation share.
        split_seed: the data module's split seed.
        excluded: question texts left out (the teacher's, :func:`reranker_questions`).
        count: the questions drawn from the rest; None: all of them.
        seed: that draw's seed.
    """
    side, val = training_side(full, val_fraction, split_seed)
    val_answers = {p.answer for p in val.pairs}
    candidates = [c for c in side.candidates if c.text not in val_answers]
    pairs = [p for p in side.pairs if p.question not in excluded]
    rest = reassemble(full, f"{full.pool}-distill", candidates, pairs)
    pool = question_subset(rest, count, seed)
    counts = {"training_side_questions": len(side.questions),
              "teacher_questions_left_out": len(side.questions) - len(rest.questions),
              "questions_available": len(rest.questions), "questions": len(pool.questions),
              "training_side_sentences": len(side.candidates),
              "validation_answers_left_out": len(side.candidates) - len(candidates),
              "candidates": len(pool.candidates)}
    return pool, counts
