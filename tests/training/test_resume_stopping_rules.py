"""Exact resume under every stopping rule (issue 76): a run stopped at any checkpoint it wrote
(mid-epoch on the step count, at an epoch's end, after a validation inside an epoch, at an
epoch's last step that no validation follows) and run again ends with the global step count,
epochs, validation scores, best checkpoint and weights of the uninterrupted run, under
``max_steps``, ``max_epochs`` and both (:class:`~retrieval_qa.training.exact_resume.
ExactResumeFitLoop`); the same with Lightning's ``max_time`` and the
:class:`~retrieval_qa.training.budgets.TimeBudget` of the classifiers' trainings.

The reported bug: ``trainer.max_epochs=3 trainer.max_steps=12`` (4 steps an epoch), killed in
epoch 2 and run again, resumed from epoch 1's end and ended at 8 steps (with
``max_epochs=-1``: 12 steps, other weights). Lightning marks every restored loop of a run with
``max_steps`` as restarting and takes a finished epoch up again, counting it twice.

Kills are simulated by copying the run folder each time ``last.ckpt`` is written (what a kill
right after that write leaves) and running the same command on a copy put back in place; one
test kills a process with SIGKILL. Tolerance: none (``atol=0, rtol=0``): both runs are the
same computation (batches of the same shapes, one thread, one machine), so any difference is
another data order, random stream or step count after the restart."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest
import pytorch_lightning as pl
import torch
from helpers import killed_run, tiny, tiny_overrides
from pytorch_lightning.callbacks import timer
from torch.utils.data import TensorDataset

from retrieval_qa.data.resumable import ResumableShuffleLoader
from retrieval_qa.training import budgets
from retrieval_qa.training.budgets import TimeBudget
from retrieval_qa.training.exact_resume import ExactResumeFitLoop
from retrieval_qa.training.resumable_checkpoints import ResumableCheckpoints
from retrieval_qa.training.run import train
from retrieval_qa.training.trainer import build_trainer, fit, trainer_config

# 64 pairs of batch 8: 7 steps an epoch (steps 1-7, 8-14, 15-21); dropout draws random masks
RUN = ("test_after_fit=false", "model.towers.encoder.dropout=0.3", "data.max_train_pairs=64",
       "trainer.checkpoint_every_minutes=0", "trainer.weights_every_minutes=0", "threads=1",
       "trainer.max_epochs=3")
RUN_DIR = Path("dual_gru") / "cpu-seed42"
EXACT = {"atol": 0.0, "rtol": 0.0}  # see the module docstring

#: stopping rules and checkpoint cadences: (settings, the steps whose last.ckpt is resumed,
#: the run's steps)
CASES = {
    # max_steps at the third epoch's end (the reported command's shape): epoch ends 7, 14
    "max_epochs and max_steps at an epoch end": (
        ("trainer.max_steps=21", "trainer.checkpoint_every_n_steps=5"),
        (5, 7, 10, 14, 21), 21),
    # max_steps inside epoch 3, no epoch limit; 18 is written at the (cut) epoch's end
    "max_steps alone, ending inside an epoch": (
        ("trainer.max_epochs=-1", "trainer.max_steps=18", "trainer.checkpoint_every_n_steps=5"),
        (7, 14, 18), 18),
    # validation every second epoch: step 7 is written at the epoch's last step (no
    # validation follows it), step 14 after the validation that ends epoch 2
    "an epoch's last step without validation": (
        ("trainer.max_steps=19", "trainer.check_val_every_n_epoch=2",
         "trainer.checkpoint_every_n_steps=7"),
        (7, 14, 19), 19),
    # validation every half epoch: last.ckpt after the validations inside the epochs too
    "validations inside the epochs": (
        ("trainer.max_steps=20", "trainer.val_check_interval=0.5", "trainer.monitor=step"),
        (3, 7, 10, 17, 20), 20),
    # the epoch rule alone (Lightning's own path, which was right)
    "max_epochs alone": (("trainer.checkpoint_every_n_steps=5",), (5, 7, 21), 21),
}


def _run(setup_dirs, out, *extra) -> tuple[dict, dict]:
    """An in-process run: its report and its weights when training ended and as exported
    (the run's last.ckpt, written at its end, and the best validation's towers)."""
    report = train(tiny(setup_dirs, out, *RUN, *extra))
    last = torch.load(out / RUN_DIR / "checkpoints" / "last.ckpt", weights_only=False,
                      map_location="cpu")
    return report, {**{f"final {k}": v for k, v in last["state_dict"].items()},
                    **{f"exported {k}": v for k, v in
                       torch.load(Path(report["checkpoint"]) / "towers.pt").items()}}


def _straight_with_snapshots(setup_dirs, out, snapshots, monkeypatch, *extra):
    """The uninterrupted run; after each write of last.ckpt, a copy of the run folder (what
    a kill right then leaves) in ``snapshots/<global step>``."""
    original = ResumableCheckpoints.save

    def save(self, trainer):
        path = original(self, trainer)
        target = snapshots / str(trainer.global_step)
        shutil.rmtree(target, ignore_errors=True)  # the later write at a step wins
        shutil.copytree(out / RUN_DIR, target, ignore=shutil.ignore_patterns("*.tmp"))
        return path

    with monkeypatch.context() as m:
        m.setattr(ResumableCheckpoints, "save", save)
        return _run(setup_dirs, out, *extra)


def _assert_same_run(straight, resumed, last: Path) -> None:
    (a, a_weights), (b, b_weights) = straight, resumed
    assert b["resumed_from"] == str(last)
    assert (b["global_steps"], b["epochs"]) == (a["global_steps"], a["epochs"])
    assert b["last_val"] == a["last_val"]  # the last validation, before or after the restart
    assert b["best_val_score"] == a["best_val_score"]
    assert Path(b["best_training_checkpoint"]).name == Path(a["best_training_checkpoint"]).name
    assert a_weights.keys() == b_weights.keys()
    for k in a_weights:
        torch.testing.assert_close(b_weights[k], a_weights[k], **EXACT, msg=k)


# a run stopped by max_steps inside an epoch ends before its next validation: the checkpoint
# callback then has no val/r@1 to compare, which Lightning says (expected here)
@pytest.mark.filterwarnings("ignore:.ModelCheckpoint.monitor='val/r@1'.. could not find")
@pytest.mark.parametrize("case", list(CASES))
def test_a_run_resumed_from_any_of_its_checkpoints_ends_as_the_uninterrupted_run(
        setup_dirs, tmp_path, monkeypatch, case):
    extra, steps, total = CASES[case]
    out, snapshots = tmp_path / "run", tmp_path / "snapshots"
    straight = _straight_with_snapshots(setup_dirs, out, snapshots, monkeypatch, *extra)
    assert straight[0]["global_steps"] == total
    assert {int(p.name) for p in snapshots.iterdir()} >= set(steps)
    for step in steps:
        shutil.rmtree(out)
        shutil.copytree(snapshots / str(step), out / RUN_DIR)
        last = out / RUN_DIR / "checkpoints" / "last.ckpt"
        assert torch.load(last, weights_only=False, map_location="cpu")["global_step"] == step
        _assert_same_run(straight, _run(setup_dirs, out, *extra), last)


def test_the_reported_command_killed_in_epoch_2_resumes_to_the_uninterrupted_run(
        setup_dirs, tmp_path):
    """The reported bug, in a new process: max_epochs=3 and max_steps=21 (three epochs),
    the default checkpoints (epoch ends), SIGKILL at step 10; the same command run again
    resumes from epoch 1's end (step 7) and trains 21 steps, not 14."""
    extra = ("trainer.max_steps=21",)
    straight = _run(setup_dirs, tmp_path / "a", *extra)
    out = tmp_path / "b"
    log = tmp_path / "killed.log"
    returncode = killed_run(tiny_overrides(setup_dirs, out, *RUN, *extra), "step:10", log,
                            tmp_path)
    assert returncode == -signal.SIGKILL, log.read_text()[-3000:]
    last = out / RUN_DIR / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=False, map_location="cpu")["global_step"] == 7
    _assert_same_run(straight, _run(setup_dirs, out, *extra), last)


# --- Lightning's max_time and the classifiers' TimeBudget ---------------------------------
class _Regression(pl.LightningModule):
    """A linear regression with dropout (random masks at every step), Adam."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Dropout(0.3), torch.nn.Linear(4, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x).squeeze(-1), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.05)


class _Clock:
    """A fake ``time.monotonic`` that :class:`_Ticks` moves one second a training step."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Ticks(pl.Callback):
    def __init__(self, clock: _Clock) -> None:
        self.clock = clock

    def on_train_batch_start(self, *args) -> None:
        self.clock.now += 1.0


def _fit(run_dir: Path, stops: dict, budget_minutes: float | None = None,
         clock: _Clock | None = None) -> tuple[_Regression, pl.Trainer]:
    """The classifiers' Trainer (conf/trainer/classifier.yaml) on 64 examples of batch 8 (8
    steps an epoch, a resumable loader), resuming from ``run_dir``'s last.ckpt when there is
    one; with ``clock``, one second a step."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 4, generator=g)
    data = TensorDataset(x, x @ torch.tensor([1.0, -2.0, 0.5, 3.0]))
    loader = ResumableShuffleLoader(data, seed=3, batch_size=8, drop_last=True)
    callbacks = [_Ticks(clock)] if clock else []
    callbacks += [TimeBudget(budget_minutes)] if budget_minutes else []
    cfg = trainer_config("classifier", accelerator="cpu", checkpoint_every_minutes=0,
                         weights_every_minutes=0, **stops)
    trainer = build_trainer(cfg, run_dir, callbacks=callbacks)
    last = run_dir / "checkpoints" / "last.ckpt"
    module = _Regression()
    fit(trainer, module, last if last.is_file() else None, train_dataloaders=loader)
    return module, trainer


STOPS = {"max_epochs": {"max_epochs": 3, "max_steps": -1},
         "max_steps": {"max_epochs": -1, "max_steps": 24},
         "both": {"max_epochs": 3, "max_steps": 24}}


# the test's Trainer is Lightning's own with max_time (its Timer callback), resumed from a
# checkpoint of a Trainer built the same way: Lightning's reminder about callbacks is expected
@pytest.mark.filterwarnings("ignore:Be aware that when using .ckpt_path.")
@pytest.mark.parametrize("rule", list(STOPS))
def test_lightnings_max_time_cuts_an_epoch_and_the_run_resumes_inside_it(
        tmp_path, monkeypatch, one_thread, rule):
    """Lightning's ``max_time`` stops by ending the epoch: last.ckpt is written at the cut
    epoch's end (step 11, inside epoch 2). Run again without the time limit, the run trains
    the rest of that epoch (Lightning would start epoch 3, or, with max_steps, count epoch 2
    twice) and ends with the uninterrupted run's step count and weights."""
    straight, a = _fit(tmp_path / "straight", STOPS[rule])
    clock = _Clock()
    monkeypatch.setattr(timer, "time", SimpleNamespace(monotonic=clock))
    _, cut = _fit(tmp_path / "cut", {**STOPS[rule], "max_time": {"seconds": 11}}, clock=clock)
    assert cut.global_step == 11
    state = torch.load(tmp_path / "cut" / "checkpoints" / "last.ckpt", weights_only=False)
    assert state["global_step"] == 11 and state["epoch"] == 1  # written at the cut epoch's end
    monkeypatch.undo()
    resumed, b = _fit(tmp_path / "cut", STOPS[rule])
    assert isinstance(b.fit_loop, ExactResumeFitLoop)
    assert (b.global_step, b.current_epoch) == (a.global_step, a.current_epoch) == (24, 3)
    for k, v in straight.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[k], v, **EXACT, msg=k)


def test_a_time_budget_stops_at_a_step_and_the_run_resumes_there(tmp_path, monkeypatch,
                                                                  one_thread):
    """The classifiers' ``max_minutes`` (:class:`TimeBudget`): stopped at step 10 with
    max_steps set, resumed without a budget: 24 steps, the uninterrupted weights."""
    stops = STOPS["both"]
    straight, a = _fit(tmp_path / "straight", stops)
    clock = _Clock()
    monkeypatch.setattr(budgets, "time", SimpleNamespace(monotonic=clock))
    _, cut = _fit(tmp_path / "cut", stops, budget_minutes=10 / 60, clock=clock)
    assert cut.global_step == 10
    monkeypatch.undo()
    resumed, b = _fit(tmp_path / "cut", stops)
    assert (b.global_step, b.current_epoch) == (24, 3)
    for k, v in straight.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[k], v, **EXACT, msg=k)
