"""Trainer callbacks of every training (:func:`~.trainer.build_trainer`): the best
validations' weights, the resumable checkpoint (at validations, epoch ends, on a clock, within
an epoch), a clean stop on SIGTERM/SIGINT, validation in runs that `max_steps` ends mid-epoch,
the model summary and a progress bar on stderr whose total is the steps that will run.

The Trainer gets one callback per block of ``trainer.callbacks`` (conf/trainer/default.yaml),
in their order: the block's ``_target_`` called with its keys (retrieval_qa/registry.py) and,
when it takes it, ``dirpath`` (the run's ``checkpoints/`` folder). A target may return None
(no callback: e.g. the progress bar of a run without one); a block set to null is off. A new
callback is a class (or function) and a block that names it.

The larger callbacks have modules of their own: :mod:`.resumable_checkpoints` (``last.ckpt``
and the stop on a signal), :mod:`.exact_resume` (the fit loop that resumes it exactly),
:mod:`.rng_state` (the random-number states it carries) and :mod:`.progress_bar`. This module
holds the small ones and is the one the blocks name (so do the ``config.yaml`` files of run
folders, compared when a run resumes): each callback is importable from here."""

from __future__ import annotations

import logging
from pathlib import Path

import pytorch_lightning as pl

from .exact_resume import ExactResumeFitLoop
from .progress_bar import StderrProgressBar, batches_to_run, on_gpu, progress_bar
from .resumable_checkpoints import ResumableCheckpoints, epoch_ends_here, validation_follows
from .rng_state import rng_states, set_rng_states

__all__ = ["ExactResumeFitLoop", "ResumableCheckpoints", "StderrProgressBar", "ValidateAtMaxSteps",
           "batches_to_run", "best_checkpoint", "epoch_ends_here", "model_summary", "on_gpu",
           "progress_bar", "rng_states", "set_rng_states", "validation_follows"]

log = logging.getLogger(__name__)


def best_checkpoint(dirpath: str | Path, monitor: str, save_top_k: int
                    ) -> pl.callbacks.ModelCheckpoint:
    """The weights of the ``save_top_k`` best validations by ``monitor`` (higher is better),
    ``best-{epoch}-{step}.ckpt``: weights only (no optimiser or loop state), what picking the
    best weights needs; the resumable ``last.ckpt`` is :class:`ResumableCheckpoints`'s.

    Args:
        dirpath: the folder of the checkpoints (the run's ``checkpoints/``).
        monitor: the validation metric (higher is better).
        save_top_k: how many of the best to keep.
    """
    return pl.callbacks.ModelCheckpoint(
        dirpath=dirpath, monitor=monitor, mode="max", save_top_k=save_top_k, save_last=False,
        save_weights_only=True, filename="best-{epoch}-{step}", enable_version_counter=False)


def model_summary(max_depth: int) -> pl.callbacks.ModelSummary:
    """The model's summary (on stderr) to ``max_depth`` levels of modules.

    Args:
        max_depth: the levels of modules shown (0: none).
    """
    return pl.callbacks.ModelSummary(max_depth=max_depth)


class ValidateAtMaxSteps(pl.Callback):
    """When ``max_steps`` ends the run inside the first epoch, validation (otherwise at the
    epoch's end) runs at the last step instead, so a run capped by ``max_steps`` is always
    validated and has a best checkpoint."""

    def on_train_start(self, trainer, pl_module) -> None:
        if trainer.max_steps is None or trainer.max_steps <= 0:
            return
        batches = trainer.num_training_batches
        last_batch = trainer.max_steps * trainer.accumulate_grad_batches
        if (batches == float("inf") or last_batch >= batches
                or trainer.val_check_batch is None or trainer.val_check_batch <= last_batch):
            return  # an epoch ends first, or validation runs before the last step anyway
        trainer.val_check_batch = last_batch
        log.info("max_steps=%d ends the run inside the first epoch: validating at that step",
                 trainer.max_steps)
