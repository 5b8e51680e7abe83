"""What a training must have done for its result to be one: trained at least one step
(:func:`check_trained`) and not diverged (:class:`DivergenceStop`). A run that fails either
stops with one line naming the setting to change; ``rqa train`` writes no ``result.json`` for
it, so it is never reported or reused as a result.

Divergence: a non-finite loss stops the run at once (the methods' own check,
:meth:`~retrieval_qa.models.base.RetrievalModule.check_finite`, names the step; this callback
also catches it for a module without one). A loss that stays far above where it started is the
other way a training diverges (a learning rate of 1e6: the dual-GRU's loss goes from 4.1 at
the first step to about 50 and stays there), and the rule is (conf/trainer/default.yaml):

- the reference is the loss of the run's first training batch, the initial weights' loss;
- every ``window`` training batches (``trainer.divergence_window``), the mean loss of those
  batches is compared with ``factor`` times the reference (``trainer.divergence_factor``);
- ``patience`` such checks above it in a row (``trainer.divergence_patience``) stop the run;
  so does a run that ends (its step or epoch limit) with its last check above it, patience
  being the time a run has to come back. ``patience: 0`` turns the rule off.

The reference must be positive for the rule to apply (the losses of ``rqa train`` are: a
softmax cross-entropy starts near log(batch size)); a loss that starts at or below 0 is checked
for finiteness only. The state (reference, the sum of the current window, the checks above in
a row) is kept in the resumable checkpoint, so a resumed run decides as the uninterrupted one.
The loss is read from the device once a window (no step waits for the host)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pytorch_lightning as pl
import torch

from ..errors import UsageError


class NoTrainingSteps(UsageError):
    """A run that trained no step (its batch larger than its training data, say): its model
    is the untrained one, not a result."""


class TrainingDiverged(UsageError):
    """A run whose training loss turned non-finite or stayed far above its starting value."""


def _learning_rate(trainer: pl.Trainer, pl_module: pl.LightningModule) -> float | None:
    """The configured learning rate: the module's ``optimizer_cfg["lr"]`` (the methods of
    ``rqa train``), else the first optimizer's initial one."""
    lr = getattr(pl_module, "optimizer_cfg", {}).get("lr")
    if lr is None and trainer.optimizers:
        group = trainer.optimizers[0].param_groups[0]
        lr = group.get("initial_lr", group.get("lr"))
    return None if lr is None else float(lr)


def lower_learning_rate_fix(setting: str, lr: float | None) -> str:
    """The fix of a diverged run: the learning rate at a tenth, and a clean folder for it
    (another setting is another run).

    Args:
        setting: the learning rate's key.
        lr: its value; None: not known (the fix names only the key).
    """
    now = f", {setting}={lr:g} now (e.g. {setting}={lr / 10:g})" if lr else f" ({setting})"
    return (f"a lower learning rate{now}, with resume=never or another output_dir: this folder "
            f"holds the diverged run")


class DivergenceStop(pl.Callback):
    """Stops a training whose loss turns non-finite or stays far above its first batch's
    loss, with :class:`TrainingDiverged` naming the learning rate's setting (see the module
    docstring for the rule).

    Args:
        window: training batches per check (their mean loss is compared).
        factor: how many times the first batch's loss a window's mean may reach.
        patience: checks above in a row that stop the run (0: the rule is off; the
            non-finite check stays).
        setting: the learning rate's key, named in the error (``model.optimizer.lr``).
    """

    def __init__(self, window: int, factor: float, patience: int,
                 setting: str) -> None:
        if int(window) < 1 or not float(factor) > 1 or int(patience) < 0:
            raise ValueError(f"DivergenceStop(window={window}, factor={factor}, "
                             f"patience={patience}): window >= 1, factor > 1 and patience >= 0 "
                             "(fix: trainer.divergence_* in conf/trainer/default.yaml)")
        self.window, self.factor, self.patience = int(window), float(factor), int(patience)
        self.setting = setting
        self.reference: float | None = None
        self._first: torch.Tensor | None = None  # the first batch's loss, on its device
        self._sum: torch.Tensor | None = None    # the current window's losses, on the device
        self._count = 0
        self.streak = 0                           # checks above the limit in a row
        self.last_mean: float | None = None       # the last check's mean

    @property
    def limit(self) -> float | None:
        """The mean loss a window may not exceed (None: no positive reference yet)."""
        ref = self.reference
        return ref * self.factor if ref is not None and math.isfinite(ref) and ref > 0 else None

    @staticmethod
    def _loss(outputs, trainer: pl.Trainer, pl_module) -> torch.Tensor | None:
        """The step's loss: the module's ``divergence_loss`` (the term it names, set at each
        step by :meth:`~retrieval_qa.models.base.RetrievalModule.log_training`), else the
        loss the step returned."""
        term = getattr(pl_module, "divergence_loss", None)
        if torch.is_tensor(term):
            return term.detach().float()
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if not torch.is_tensor(loss):
            return None  # a step that returned no loss (manual optimisation, a skipped batch)
        # Lightning divides the loss by accumulate_grad_batches before handing it over
        return loss.detach().float() * trainer.accumulate_grad_batches

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        loss = self._loss(outputs, trainer, pl_module)
        if loss is None:
            return
        if self.reference is None and self._first is None:
            self._first = loss.clone()
        self._sum = loss.clone() if self._sum is None else self._sum + loss
        self._count += 1
        if self._count >= self.window:
            self._check(trainer, pl_module)

    def _settle_reference(self) -> None:
        if self.reference is None and self._first is not None:
            self.reference, self._first = float(self._first), None

    def _check(self, trainer, pl_module) -> None:
        """Read the window's mean (one read from the device) and stop the run when the rule
        says so; process 0 decides for all."""
        self._settle_reference()
        mean = float(self._sum) / self._count
        self._sum, self._count = None, 0
        self.last_mean = mean
        limit = self.limit
        above = not math.isfinite(mean) or (limit is not None and mean > limit)
        self.streak = self.streak + 1 if above else 0
        stop = not math.isfinite(mean) or (self.patience > 0 and self.streak >= self.patience)
        if trainer.strategy.broadcast(stop, src=0):
            self._raise(trainer, pl_module, f"{self.streak} checks in a row")

    def on_fit_end(self, trainer, pl_module) -> None:
        # a run that ended at its step or epoch limit (not stopped early: a budget, a time
        # limit) with its last check above the limit has no time left to come back
        ended = not trainer.should_stop and trainer.state.fn == "fit"
        above = self.patience > 0 and self.streak > 0
        if ended and trainer.strategy.broadcast(above, src=0):
            self._raise(trainer, pl_module, "its last check")

    def _raise(self, trainer, pl_module, when: str) -> None:
        mean, ref = self.last_mean, self.reference
        term = getattr(pl_module, "divergence_term", None)
        loss = f"training loss ({term})" if term else "training loss"
        if mean is None or not math.isfinite(mean):
            what = f"turned non-finite ({mean})"
        else:
            what = (f"stayed above {self.factor:g} x its first batch's {ref:.4g} (a mean of "
                    f"{mean:.4g} over {self.window} batches at {when}; the rule: "
                    f"trainer.divergence_window={self.window}, "
                    f"trainer.divergence_factor={self.factor:g}, "
                    f"trainer.divergence_patience={self.patience})")
        raise TrainingDiverged(
            f"training diverged at step {trainer.global_step}: the {loss} {what}; no result "
            f"was written (fix: "
            f"{lower_learning_rate_fix(self.setting, _learning_rate(trainer, pl_module))})")

    # the state travels with the resumable checkpoint (a resumed run decides the same)
    def state_dict(self) -> dict:
        self._settle_reference()
        return {"reference": self.reference, "streak": self.streak, "count": self._count,
                "sum": None if self._sum is None else float(self._sum),
                "last_mean": self.last_mean}

    def load_state_dict(self, state_dict: dict) -> None:
        self.reference = state_dict.get("reference")
        self.streak = int(state_dict.get("streak", 0))
        self._count = int(state_dict.get("count", 0))
        total = state_dict.get("sum")
        self._sum = None if total is None else torch.tensor(total, dtype=torch.float32)
        self.last_mean = state_dict.get("last_mean")
        self._first = None


def _pairs_and_batch(data) -> tuple[int | None, int | None]:
    """The training pairs and the (global) batch size of a data module, None where it does
    not say: ``train_pairs`` (ReQA's, extra sources merged), else its ``describe()``."""
    info = data.describe() if hasattr(data, "describe") else {}
    pairs = getattr(data, "train_pairs", None)
    if hasattr(pairs, "__len__"):
        pairs = len(pairs)
    elif pairs is None or not isinstance(pairs, int):
        train = info.get("train")
        pairs = train.get("pairs") if isinstance(train, Mapping) else info.get("train_pairs")
    return pairs, info.get("global_batch_size", info.get("batch_size"))


def check_trained(trainer: pl.Trainer, data, fix_batch: str = "data.batch_size") -> None:
    """Refuse (:class:`NoTrainingSteps`) a fit that trained no step: its model is the untrained
    one. Names the batch size against the training pairs when there was no training batch.

    Args:
        trainer: the Trainer after ``fit``.
        data: the data module (its ``describe()`` gives the pairs and the batch size).
        fix_batch: the batch size's setting, named in the error.
    """
    if trainer.global_step > 0:
        return
    pairs, batch = _pairs_and_batch(data)
    if not trainer.num_training_batches:
        of = f" of the {pairs} training pairs" if pairs is not None else ""
        size = f"{fix_batch}={batch}" if batch is not None else fix_batch
        at_most = f"a {fix_batch} of at most {pairs} (fewer when question or answer texts " \
                  f"repeat)" if pairs else f"a smaller {fix_batch}"
        raise NoTrainingSteps(
            f"no training batch: {size} makes no full batch{of} (a batch holds no question or "
            f"answer text twice; a partial batch is dropped), so nothing was trained; no result "
            f"was written (fix: {at_most}, or more training pairs: data.max_train_pairs)")
    raise NoTrainingSteps(
        f"the run trained 0 steps (trainer.max_steps={trainer.max_steps}, "
        f"trainer.max_epochs={trainer.max_epochs}, {trainer.num_training_batches} training "
        f"batches an epoch); no result was written (fix: settings that train at least one "
        f"step)")
