"""Trainer callbacks of every training (:func:`~.trainer.build_trainer`): the best
validations' weights, the resumable checkpoint (at validations, epoch ends, on a clock, within
an epoch), a clean stop on SIGTERM/SIGINT, validation in runs that `max_steps` ends mid-epoch,
the model summary and a progress bar on stderr whose total is the steps that will run.

The Trainer gets one callback per block of ``trainer.callbacks`` (conf/trainer/default.yaml),
in their order: the block's ``_target_`` called with its keys (retrieval_qa/registry.py) and,
when it takes it, ``dirpath`` (the run's ``checkpoints/`` folder). A target may return None
(no callback: e.g. the progress bar of a run without one); a block set to null is off. A new
callback is a class (or function) and a block that names it."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import TQDMProgressBar
from pytorch_lightning.callbacks.progress.tqdm_progress import convert_inf
from pytorch_lightning.loops import _FitLoop, _Loop
from pytorch_lightning.loops.utilities import _is_max_limit_reached

from ..errors import RunInterrupted  # raised here; defined light, for the command line

log = logging.getLogger(__name__)


def rng_states() -> dict:
    """The process's random-number states (torch, every CUDA device, numpy, python) as
    tensors and plain values, loadable from a checkpoint with ``weights_only=True``."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    version, state, py_gauss = random.getstate()
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss),
                      float(gauss)],
            "python": [version, list(state), py_gauss]}


def set_rng_states(states: dict) -> None:
    """Restore what :func:`rng_states` returned. CUDA states: those of the devices that are
    visible (a checkpoint written with more GPUs than this process sees, or on a GPU and
    resumed on a CPU, restores what it can and says so in a log line)."""
    torch.set_rng_state(states["torch"])
    cuda = states["cuda"]
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for device, state in enumerate(cuda[:visible]):
        torch.cuda.set_rng_state(state, device)
    if cuda and len(cuda) != visible:
        log.warning("the checkpoint holds the CUDA random-number states of %d device(s) and "
                    "%d are visible: restored those of the first %d only", len(cuda), visible,
                    min(len(cuda), visible))
    kind, keys, pos, has_gauss, gauss = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, state, py_gauss = states["python"]
    random.setstate((version, tuple(state), py_gauss))


def validation_follows(trainer: pl.Trainer) -> bool:
    """Whether Lightning validates right after the training batch that just ended (the
    epoch's last batch, a ``val_check_interval`` batch, ...): its own test."""
    loop = trainer.fit_loop
    return bool(loop.epoch_loop._should_check_val_fx(loop._data_fetcher))


def epoch_ends_here(trainer: pl.Trainer) -> bool:
    """Whether the training epoch ends after the current batch (its last batch, ``max_steps``
    reached, a stop requested): Lightning's own test."""
    return bool(trainer.fit_loop.epoch_loop._is_training_done or trainer.should_stop)


def on_gpu(accelerator: str) -> bool:
    """Whether a Trainer with this ``accelerator`` runs on a CUDA device."""
    return accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available()


def best_checkpoint(dirpath: str | Path, monitor: str, save_top_k: int
                    ) -> pl.callbacks.ModelCheckpoint:
    """The weights of the ``save_top_k`` best validations by ``monitor`` (higher is better),
    ``best-{epoch}-{step}.ckpt``: weights only (no optimiser or loop state), what picking the
    best weights needs; the resumable ``last.ckpt`` is :class:`ResumableCheckpoints`'s."""
    return pl.callbacks.ModelCheckpoint(
        dirpath=dirpath, monitor=monitor, mode="max", save_top_k=save_top_k, save_last=False,
        save_weights_only=True, filename="best-{epoch}-{step}", enable_version_counter=False)


def model_summary(max_depth: int) -> pl.callbacks.ModelSummary:
    """The model's summary (on stderr) to ``max_depth`` levels of modules."""
    return pl.callbacks.ModelSummary(max_depth=max_depth)


def progress_bar(enabled: bool, refresh_steps: int | str, accelerator: str
                 ) -> StderrProgressBar | None:
    """:class:`StderrProgressBar` refreshed (with its loss read-back) every ``refresh_steps``
    steps (``auto``: 1 on a CPU, 25 on a GPU); None when not ``enabled``
    (``trainer.enable_progress_bar``)."""
    if not enabled:
        return None
    if refresh_steps == "auto":
        refresh_steps = 25 if on_gpu(accelerator) else 1
    return StderrProgressBar(refresh_rate=int(refresh_steps))


def batches_to_run(trainer: pl.Trainer, done: int) -> int | float:
    """The training batches of the current epoch that will have run when it ends, ``done`` of
    them already: the epoch's, or fewer when ``max_steps`` ends the run inside it (optimizer
    steps of ``accumulate_grad_batches`` batches); ``inf`` for an epoch of unknown length
    without ``max_steps``."""
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


class ExactResumeFitLoop(_FitLoop):
    """Lightning's fit loop with its reading of a checkpoint written at an epoch's end (in
    ``on_train_epoch_end``: the epoch counted processed, not yet completed) made the same
    whatever stops the run, so the resumed run continues as the uninterrupted one:

    - the epoch ran all its batches (or the run reached ``max_steps``): the run resumes at the
      next epoch's start, the epoch counted completed at once;
    - the epoch was cut short by a stop (Lightning's ``max_time``, ``trainer.should_stop``):
      the run resumes inside it, after its last step, the epoch counted processed once.

    Lightning (2.6) reads such a checkpoint by the run's stopping rule instead. With
    ``max_steps`` set it marks every restored fit loop as restarting
    (``_FitLoop.restarting``: ``... or self._iteration_based_training()``) and takes the
    finished epoch up again: its end hooks run twice and it is counted processed twice, so the
    resumed run skips an epoch against ``max_epochs`` (3 epochs of 4 steps, ``max_steps=12``,
    resumed after epoch 1: 8 steps) and, without ``max_epochs``, every later epoch draws the
    sampler order of the epoch after it (other batches: other weights). Without ``max_steps``
    it starts the next epoch also after an epoch cut short, whose remaining batches are never
    trained. Checkpoints written inside an epoch (at a step's end, after a validation) are
    left to Lightning. Set on its Trainer by :class:`ResumableCheckpoints` (``setup``), before
    a checkpoint is restored."""

    def run(self) -> None:
        if self._loaded_from_state_dict:  # right after a checkpoint was restored
            self.setup_data()  # the epoch's length, for the test below (run does it anyway)
            self._settle_restored_epoch()
        super().run()

    def _settle_restored_epoch(self) -> None:
        current, total = self.epoch_progress.current, self.epoch_progress.total
        if not current.ready == current.started == current.processed == current.completed + 1:
            return  # not written at an epoch's end
        steps_done = _is_max_limit_reached(self.epoch_loop.global_step, self.max_steps)
        if self.epoch_loop._num_ready_batches_reached() or steps_done:
            self.epoch_progress.increment_completed()
            _Loop.restarting.fset(self, False)
        else:  # as a checkpoint written at that step: the rest of the epoch runs
            current.processed -= 1
            total.processed -= 1
            _Loop.restarting.fset(self, True)


class ResumableCheckpoints(pl.callbacks.Checkpoint):
    """Writes the resumable ``last.ckpt``, the run's one checkpoint with optimiser and loop
    state: after every validation inside an epoch and at every epoch's end, after its
    validation (so a crash never redoes a finished epoch), every ``every_n_steps`` optimizer steps and/or every
    ``every_minutes`` minutes (0: off), and when SIGTERM or SIGINT arrives; after a signal the
    run stops with :class:`RunInterrupted`. Between them, every ``weights_every_minutes``, a
    weights-only ``last-weights.ckpt`` (no optimiser or loop state: cheap at GPU rates; for
    export or inspection of a run that died, not for resuming). Checkpoints are written to a
    temporary file and renamed, so a kill mid-write leaves the previous one. Never between a
    step and the validation after it (Lightning would resume such a checkpoint past that
    validation): one due there is the one written after the validation, and the stop on a
    signal waits for the end of the next step. A checkpoint callback (Lightning runs those
    after the others) placed after the best-checkpoint one
    (:func:`~.trainer.build_trainer`), and writing where that one writes (at an epoch's end
    when the validation ends the epoch), so ``last.ckpt`` holds the best checkpoints' choice
    of the validation before it.

    A run resumed from its ``last.ckpt`` (mid-epoch, at an epoch's end or after a validation)
    continues exactly as the uninterrupted run, whatever stops it (``max_steps``,
    ``max_epochs``, a time limit: the Trainer's fit loop is made an
    :class:`ExactResumeFitLoop`), with the same step count, weights and last validation's
    scores (:attr:`last_validation`), also after a
    hard kill in a new process: the training data loader is resumable (its position is in the
    checkpoint), and the random-number states (torch, CUDA, numpy, python) are saved with it
    and restored before the first training step after the restart (dropout draws the same
    masks). For the saved states to be those the uninterrupted run has at its next training
    step wherever the checkpoint was written, nothing between a checkpoint and the next
    training step may draw from the global generators: the data loaders have their own
    (:mod:`retrieval_qa.data.seeded_loader`), and no checkpoint is written between a step and
    the validation after it. A checkpoint written in a resumed run before its first training
    step holds the states still to be restored.

    The clock is read on process 0 every ``check_every`` steps and its decision broadcast, so
    every process saves at the same step under DDP and no step waits on the host otherwise."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, dirpath: str | Path, every_n_steps: int, every_minutes: float,
                 weights_every_minutes: float, check_every: int):
        self.dirpath = Path(dirpath)
        self.every_n_steps = int(every_n_steps or 0)
        self.every_seconds = 60.0 * float(every_minutes or 0)
        self.weights_every_seconds = 60.0 * float(weights_every_minutes or 0)
        self.check_every = max(int(check_every), 1)
        self.received: int | None = None
        self._previous: dict = {}
        self._last_saved_step = -1
        self._clock = {"resumable": time.monotonic(), "weights": time.monotonic()}
        self._rng_to_restore: dict | None = None
        self._deferred = False  # a checkpoint due at a step that a validation followed
        #: the scores of the run's last validation (``val/...``), kept in the checkpoint: a
        #: run resumed after its last validation reports them as the uninterrupted run does
        self.last_validation: dict[str, float] = {}

    # signals -------------------------------------------------------------------------------
    def _handler(self, signum, _frame) -> None:
        if self.received is None:
            print(f"\nreceived {signal.Signals(signum).name}: saving a checkpoint after the "
                  f"current step (after the next one when a validation follows it), then "
                  f"stopping (send it again to stop at once)", file=sys.stderr, flush=True)
            self.received = signum
        else:  # a second signal: the default behaviour
            self.restore_handlers()
            os.kill(os.getpid(), signum)

    def install_handlers(self) -> None:
        """Called on the main thread; replaces Lightning's SIGTERM handler too (it would stop
        with exit code 0 and no checkpoint)."""
        for sig in self.SIGNALS:
            with contextlib.suppress(ValueError):  # not the main thread
                self._previous.setdefault(sig, signal.getsignal(sig))
                signal.signal(sig, self._handler)

    def restore_handlers(self) -> None:
        for sig, previous in self._previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, previous)
        self._previous = {}

    def setup(self, trainer, pl_module, stage) -> None:
        # before Lightning restores a checkpoint's loops (see ExactResumeFitLoop)
        if type(trainer.fit_loop) is _FitLoop:
            trainer.fit_loop.__class__ = ExactResumeFitLoop

    def on_train_start(self, trainer, pl_module) -> None:
        self.install_handlers()  # after Lightning registered its own
        # Lightning restores stateful train loaders only if the loader is built after the
        # checkpoint is read; a linear schedule builds it earlier (to count the steps), and the
        # saved position would be dropped. Apply it here, before the first batch is drawn.
        loop = trainer.fit_loop
        states = getattr(loop, "_combined_loader_states_to_load", None)
        if states and loop._combined_loader is not None:
            loop._combined_loader._load_state_dicts(states)
            loop._combined_loader_states_to_load = []

    def teardown(self, trainer, pl_module, stage) -> None:
        self.restore_handlers()

    # checkpoints ---------------------------------------------------------------------------
    @property
    def last_path(self) -> Path:
        return self.dirpath / "last.ckpt"

    def save(self, trainer) -> str:
        self.dirpath.mkdir(parents=True, exist_ok=True)
        tmp = self.dirpath / ".last.ckpt.tmp"
        trainer.save_checkpoint(tmp, weights_only=False)
        if trainer.is_global_zero:
            os.replace(tmp, self.last_path)
        self._last_saved_step = trainer.global_step
        self._deferred = False
        return str(self.last_path)

    def save_weights(self, trainer) -> None:
        tmp = self.dirpath / ".last-weights.ckpt.tmp"
        trainer.save_checkpoint(tmp, weights_only=True)
        if trainer.is_global_zero:
            os.replace(tmp, self.dirpath / "last-weights.ckpt")

    def _due(self, trainer) -> tuple[bool, bool]:
        """(resumable checkpoint due, weights-only checkpoint due) at this step: the step
        count, or process 0's clock (read every ``check_every`` steps, broadcast)."""
        step = trainer.global_step
        by_steps = (self.every_n_steps > 0 and step > 0 and step % self.every_n_steps == 0
                    and step != self._last_saved_step)
        if not (self.every_seconds or self.weights_every_seconds) or step % self.check_every:
            return by_steps, False
        now = time.monotonic()
        due = (bool(self.every_seconds) and now - self._clock["resumable"] >= self.every_seconds,
               bool(self.weights_every_seconds)
               and now - self._clock["weights"] >= self.weights_every_seconds)
        due = trainer.strategy.broadcast(due, src=0)
        return by_steps or due[0], due[1]

    def save_unless_saved(self, trainer) -> None:
        """``last.ckpt`` at this step unless already written here (a loop's end, a budget)."""
        if trainer.global_step != self._last_saved_step:
            self.save(trainer)
            self._clock["resumable"] = self._clock["weights"] = time.monotonic()

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.state.fn != "fit" or trainer.sanity_checking:
            return
        self.last_validation = {k: float(v) for k, v in trainer.callback_metrics.items()
                                if k.startswith("val/")}
        # a validation that ends the epoch: at the epoch's end, after the best checkpoints
        # that ModelCheckpoint writes there (last.ckpt must hold their choice)
        if not epoch_ends_here(trainer):
            self.save_unless_saved(trainer)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.save_unless_saved(trainer)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self._rng_to_restore is not None:  # the first step after a restart
            set_rng_states(self._rng_to_restore)
            self._rng_to_restore = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        resumable, weights = self._due(trainer)
        if validation_follows(trainer):  # see the class docstring
            self._deferred = self._deferred or resumable
            resumable = False
        elif self.received is not None:
            raise RunInterrupted(self.received, self.save(trainer), step)
        else:
            resumable = resumable or self._deferred
        if resumable and step != self._last_saved_step:
            self.save(trainer)
            self._clock["resumable"] = self._clock["weights"] = time.monotonic()
            log.info("checkpoint at step %d: %s", step, self.last_path)
        elif weights:
            self.save_weights(trainer)
            self._clock["weights"] = time.monotonic()

    # random-number states and the last validation's scores travel with the checkpoint
    # (Lightning keeps a callback's state)
    def state_dict(self) -> dict:
        return {"rng": self._rng_to_restore or rng_states(),
                "last_validation": dict(self.last_validation)}

    def load_state_dict(self, state_dict: dict) -> None:
        self._rng_to_restore = state_dict.get("rng")
        self.last_validation = dict(state_dict.get("last_validation", {}))

    def check(self, trainer=None) -> None:
        """Outside the training loop (validation at the end, testing): stop if signalled."""
        if self.received is not None:
            path = str(self.last_path) if self.last_path.is_file() else None
            raise RunInterrupted(self.received, path, trainer.global_step if trainer else -1)


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
