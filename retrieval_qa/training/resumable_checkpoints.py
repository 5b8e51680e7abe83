"""The run's resumable checkpoint, ``last.ckpt`` (with optimiser, loop and random-number
states), and the clean stop on SIGTERM/SIGINT: :class:`ResumableCheckpoints`
(``trainer.callbacks.resumable_checkpoints``)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
from pathlib import Path

import pytorch_lightning as pl
from pytorch_lightning.loops import _FitLoop

from ..errors import RunInterrupted  # raised here; defined light, for the command line
from ..written import atomic_path
from .exact_resume import ExactResumeFitLoop
from .rng_state import rng_states, set_rng_states

log = logging.getLogger(__name__)
#: the suffix of a checkpoint's temporary file while it is written (``last.ckpt.tmp``)
TMP = ".tmp"


def validation_follows(trainer: pl.Trainer) -> bool:
    """Whether Lightning validates right after the training batch that just ended (the
    epoch's last batch, a ``val_check_interval`` batch, ...): its own test.

    Args:
        trainer: the Trainer.
    """
    loop = trainer.fit_loop
    return bool(loop.epoch_loop._should_check_val_fx(loop._data_fetcher))


def epoch_ends_here(trainer: pl.Trainer) -> bool:
    """Whether the training epoch ends after the current batch (its last batch, ``max_steps``
    reached, a stop requested): Lightning's own test.

    Args:
        trainer: the Trainer.
    """
    return bool(trainer.fit_loop.epoch_loop._is_training_done or trainer.should_stop)


class ResumableCheckpoints(pl.callbacks.Checkpoint):
    """Writes the resumable ``last.ckpt``, the run's one checkpoint with optimiser and loop
    state: after every validation inside an epoch and at every epoch's end, after its
    validation (so a crash never redoes a finished epoch), every ``every_n_steps`` optimizer steps and/or every
    ``every_minutes`` minutes (0: off), and when SIGTERM or SIGINT arrives; after a signal the
    run stops with :class:`RunInterrupted`. Between them, every ``weights_every_minutes``, a
    weights-only ``last-weights.ckpt`` (no optimiser or loop state: cheap at GPU rates; for
    export or inspection of a run that died, not for resuming). Checkpoints are written to a
    temporary file and renamed, so a kill mid-write leaves the previous one, and a failed
    write (a full disk) leaves no temporary file and names the checkpoint. Never between a
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
    every process saves at the same step under DDP and no step waits on the host otherwise.

    Args:
        dirpath: the folder of ``last.ckpt`` (the run's ``checkpoints/``).
        every_n_steps: optimizer steps between checkpoints (0 or None: off).
        every_minutes: minutes between checkpoints (0 or None: off).
        weights_every_minutes: minutes between weights-only checkpoints (0 or None: off).
        check_every: steps between readings of the clock (at least 1).
    """

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

    def _write(self, trainer, name: str, weights_only: bool) -> Path:
        """``trainer.save_checkpoint`` to ``name`` in :attr:`dirpath` through ``<name>.tmp``,
        renamed over it (:func:`~retrieval_qa.written.atomic_path`): a kill mid-write leaves
        the previous checkpoint; any error (a full disk, Ctrl-C) removes the temporary file,
        and an OSError names the checkpoint (``rqa``: one line with the fix, exit status 2).
        Every process calls it (the save is collective); process 0 writes the file."""
        target = self.dirpath / name
        if not trainer.is_global_zero:
            trainer.save_checkpoint(target.with_name(name + TMP), weights_only=weights_only)
            return target
        with atomic_path(target, "checkpoint", partial=TMP) as tmp:
            trainer.save_checkpoint(tmp, weights_only=weights_only)
        return target

    def save(self, trainer) -> str:
        self._write(trainer, self.last_path.name, weights_only=False)
        self._last_saved_step = trainer.global_step
        self._deferred = False
        return str(self.last_path)

    def save_weights(self, trainer) -> None:
        self._write(trainer, "last-weights.ckpt", weights_only=True)

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
