"""The training progress bar: Lightning's tqdm bar on stderr (stdout holds only the JSON
result), whose total is the steps that will run (``trainer.callbacks.progress_bar``)."""

from __future__ import annotations

import contextlib
import sys

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import TQDMProgressBar
from pytorch_lightning.callbacks.progress.tqdm_progress import convert_inf


def on_gpu(accelerator: str) -> bool:
    """Whether a Trainer with this ``accelerator`` runs on a CUDA device.

    Args:
        accelerator: ``trainer.accelerator``.
    """
    return accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available()


def progress_bar(enabled: bool, refresh_steps: int | str, accelerator: str
                 ) -> StderrProgressBar | None:
    """:class:`StderrProgressBar` refreshed (with its loss read-back) every ``refresh_steps``
    steps; None when not ``enabled``.

    Args:
        enabled: ``trainer.enable_progress_bar``.
        refresh_steps: steps between refreshes; ``auto``: 1 on a CPU, 25 on a GPU.
        accelerator: ``trainer.accelerator``.
    """
    if not enabled:
        return None
    if refresh_steps == "auto":
        refresh_steps = 25 if on_gpu(accelerator) else 1
    return StderrProgressBar(refresh_rate=int(refresh_steps))


def batches_to_run(trainer: pl.Trainer, done: int) -> int | float:
    """The training batches of the current epoch that will have run when it ends, ``done`` of
    them already: the epoch's, or fewer when ``max_steps`` ends the run inside it (optimizer
    steps of ``accumulate_grad_batches`` batches); ``inf`` for an epoch of unknown length
    without ``max_steps``.

    Args:
        trainer: the Trainer.
        done: the batches of the epoch already run.
    """
    total = trainer.num_training_batches
    if trainer.max_steps is not None and trainer.max_steps >= 0:
        left = (trainer.max_steps - trainer.global_step) * trainer.accumulate_grad_batches
        total = min(total, done + max(left, 0))
    return total


class StderrProgressBar(TQDMProgressBar):
    """Lightning's tqdm bar, written to stderr (stdout holds only the JSON result), with
    1-based epochs out of ``max_epochs`` ("Epoch 1/1", not "Epoch 0/0") and, as total, the
    batches that will run (:func:`batches_to_run`: ``20`` for ``trainer.max_steps=20``, not
    the epoch's 312), so the ETA is the run's."""

    def _on_stderr(self, init):
        with contextlib.redirect_stdout(sys.stderr):
            return init()

    def init_sanity_tqdm(self):
        return self._on_stderr(super().init_sanity_tqdm)

    def init_train_tqdm(self):
        return self._on_stderr(super().init_train_tqdm)

    def init_validation_tqdm(self):
        return self._on_stderr(super().init_validation_tqdm)

    def init_test_tqdm(self):
        return self._on_stderr(super().init_test_tqdm)

    def init_predict_tqdm(self):
        return self._on_stderr(super().init_predict_tqdm)

    def get_metrics(self, trainer, pl_module) -> dict:
        """Lightning's items plus the training loss, read from the device only here, at the
        bar's refresh (``refresh_rate`` steps), not at every step."""
        metrics = super().get_metrics(trainer, pl_module)
        loss = getattr(pl_module, "last_loss", None)
        if loss is not None and trainer.training:
            metrics["loss"] = f"{float(loss):.4g}"
        return metrics

    @property
    def total_train_batches(self) -> int | float:
        return batches_to_run(self.trainer, 0)  # read at an epoch's start

    def on_train_start(self, trainer, pl_module) -> None:
        super().on_train_start(trainer, pl_module)
        self._sized = False  # a run resumed inside an epoch starts no epoch: sized below

    def _describe_epoch(self, trainer) -> None:
        total = trainer.max_epochs if trainer.max_epochs and trainer.max_epochs > 0 else None
        epoch = trainer.current_epoch + 1
        self.train_progress_bar.set_description(f"Epoch {epoch}/{total}" if total else
                                                f"Epoch {epoch}")

    def on_train_epoch_start(self, trainer, *args) -> None:
        super().on_train_epoch_start(trainer, *args)
        self._sized = True
        self._describe_epoch(trainer)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if not self._sized:  # resumed after batch_idx batches of the epoch
            self._sized = True
            self.train_progress_bar.reset(convert_inf(batches_to_run(trainer, batch_idx)))
            self.train_progress_bar.initial = batch_idx
            self._describe_epoch(trainer)
