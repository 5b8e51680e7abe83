"""Budgets that stop a training early at the end of a step, with the checkpoint from which the
same run resumes exactly: :class:`TimeBudget` (minutes) and :class:`StepBudget` (steps of the
schedule). The classifiers' and the reranker's ``max_minutes`` and ``stop_after_steps``."""

from __future__ import annotations

import time

import pytorch_lightning as pl

from .resumable_checkpoints import ResumableCheckpoints, validation_follows


class Budget(pl.Callback):
    """Stops a training at the end of the first step after which :meth:`spent` holds, with
    ``last.ckpt`` written there by the run's :class:`ResumableCheckpoints` (when it has one):
    the same run started again, under another budget or none, resumes mid-epoch and continues
    exactly as if it had not stopped. Not before a validation that follows the step (it waits
    for the next step)."""

    def spent(self, trainer) -> bool:
        """Whether the budget is used up after this step."""
        raise NotImplementedError

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not self.spent(trainer) or validation_follows(trainer):
            return
        saver = next((c for c in trainer.callbacks if isinstance(c, ResumableCheckpoints)),
                     None)
        if saver is not None:
            saver.save_unless_saved(trainer)
        trainer.should_stop = True


class TimeBudget(Budget):
    """A :class:`Budget` of ``minutes`` since this call's training started. (Lightning's
    ``max_time`` stops by ending the epoch; its checkpoint, written at that cut epoch's end,
    resumes inside the epoch through :class:`~.exact_resume.ExactResumeFitLoop`, but a budget
    stops at a step and says so.) One process: the clock is not broadcast.

    Args:
        minutes: the budget, in minutes of wall-clock time.
    """

    def __init__(self, minutes: float) -> None:
        self.seconds = 60.0 * float(minutes)
        self._start = time.monotonic()

    def on_train_start(self, trainer, pl_module) -> None:
        self._start = time.monotonic()

    def spent(self, trainer) -> bool:
        return time.monotonic() - self._start >= self.seconds


class StepBudget(Budget):
    """A :class:`Budget` of optimizer steps: the training stops after step ``steps`` of its
    schedule (Lightning's ``max_steps`` would shorten the learning-rate schedule instead). A
    time-capped training's weights are rebuilt with the step count its report names.

    Args:
        steps: the optimizer step after which the training stops.
    """

    def __init__(self, steps: int) -> None:
        self.steps = int(steps)

    def spent(self, trainer) -> bool:
        return trainer.global_step >= self.steps
