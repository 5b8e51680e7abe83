"""Exact resume from every checkpoint of `rqa train`: a two-epoch run with dropout and loader
workers (persistent), killed with SIGKILL in a new process at a chosen point (mid-epoch 2,
right after the epoch-end checkpoint, right after a checkpoint written after a mid-epoch
validation, during a validation), or stopped by SIGTERM at an epoch's last step, then run
again, ends with the weights, the best checkpoint and the validation scores of the
uninterrupted run.

Bitwise equality is the point here, not a tolerance: the runs are the same command on the same
machine in the same thread setting (batches of the same shapes), so any difference is a
different random stream or a different data order after the restart."""

from __future__ import annotations

import json
import logging
import signal
from pathlib import Path

import pytest
import torch
from helpers import final_weights, killed_run, signal_at_step, tiny, tiny_overrides

from retrieval_qa.cli import main
from retrieval_qa.training import callbacks
from retrieval_qa.training.rng_state import rng_states, set_rng_states
from retrieval_qa.training.run import train

# 64 training pairs of batch 8: 7 full duplicate-free batches an epoch, steps 8-14 in epoch 2
RUN = ("test_after_fit=false", "model.towers.encoder.dropout=0.3", "data.max_train_pairs=64",
       "trainer.checkpoint_every_minutes=0", "trainer.weights_every_minutes=0")
WORKERS = "data.num_workers=2"  # persistent training workers (data.num_workers > 0)
STEPS_PER_EPOCH = 7

def _train(setup_dirs, out, monkeypatch, *extra) -> tuple[dict, dict]:
    """An in-process run: its report and the module's weights when training ended."""
    with monkeypatch.context() as m:
        final = final_weights(m)
        report = train(tiny(setup_dirs, out, *RUN, *extra))
    return report, final


def _killed(setup_dirs, out, kill: str, *extra) -> Path:
    """The run in a new process, killed with SIGKILL at ``kill``; its last.ckpt."""
    log = out.parent / f"killed-{kill.replace(':', '-')}.log"
    returncode = killed_run(tiny_overrides(setup_dirs, out, *RUN, *extra), kill, log,
                            out.parent, RQA_THREADS="1")
    assert returncode == -signal.SIGKILL, log.read_text()[-3000:]
    return out / "dual_gru" / "cpu-seed42" / "checkpoints" / "last.ckpt"


def _step_of(checkpoint: Path) -> int:
    return torch.load(checkpoint, weights_only=False, map_location="cpu")["global_step"]


def _assert_same_run(straight, resumed, last: Path) -> None:
    (a, a_weights), (b, b_weights) = straight, resumed
    assert b["resumed_from"] == str(last)
    assert b["global_steps"] == a["global_steps"] == 2 * STEPS_PER_EPOCH
    assert a_weights.keys() == b_weights.keys()
    for k in a_weights:  # exact: see the module docstring
        assert torch.equal(a_weights[k], b_weights[k]), k
    assert b["last_val"] == a["last_val"]  # the validations after the restart ran
    assert b["best_val_score"] == a["best_val_score"]
    assert Path(b["best_training_checkpoint"]).name == Path(a["best_training_checkpoint"]).name
    exported_a = torch.load(f"{a['checkpoint']}/towers.pt")
    exported_b = torch.load(f"{b['checkpoint']}/towers.pt")
    for k in exported_a:
        assert torch.equal(exported_a[k], exported_b[k]), k


@pytest.fixture(scope="module")
def uninterrupted(setup_dirs, tmp_path_factory):
    """The uninterrupted run with the given loader settings (run once each)."""
    runs = {}

    def run(*extra):
        if extra not in runs:
            with pytest.MonkeyPatch.context() as m:
                runs[extra] = _train(setup_dirs, tmp_path_factory.mktemp("straight"), m, *extra)
        return runs[extra]

    return run


def test_killed_mid_epoch_2_resumes_to_the_uninterrupted_weights(
        setup_dirs, tmp_path, monkeypatch, uninterrupted):
    every = "trainer.checkpoint_every_n_steps=3"
    last = _killed(setup_dirs, tmp_path / "b", "step:13", WORKERS, every)
    assert _step_of(last) == 12  # mid-epoch 2
    _assert_same_run(uninterrupted(WORKERS),
                     _train(setup_dirs, tmp_path / "b", monkeypatch, WORKERS, every), last)


@pytest.mark.parametrize("workers", [WORKERS, "data.num_workers=0"])
def test_killed_right_after_the_epoch_end_checkpoint_resumes_to_the_uninterrupted_weights(
        setup_dirs, tmp_path, monkeypatch, uninterrupted, workers):
    """The checkpoint a run has by default after its first epoch (written after the epoch's
    validation). Before the loaders had their own generators, a run without persistent
    workers drew the next epoch's loader seed from the global generator after it, and the
    resumed run's dropout drew other masks."""
    last = _killed(setup_dirs, tmp_path / "b", "last:0", workers)
    assert _step_of(last) == STEPS_PER_EPOCH
    _assert_same_run(uninterrupted(workers),
                     _train(setup_dirs, tmp_path / "b", monkeypatch, workers), last)


def test_killed_during_validation_resumes_and_validates_again(
        setup_dirs, tmp_path, monkeypatch, uninterrupted):
    """A periodic checkpoint due at an epoch's last step is the one written after the epoch's
    validation: Lightning resumes a checkpoint written between a step and its validation past
    that validation, which would never run (the last validation, its scores and best
    checkpoint would be missing)."""
    every = f"trainer.checkpoint_every_n_steps={STEPS_PER_EPOCH}"
    last = _killed(setup_dirs, tmp_path / "b", "validation:1", WORKERS, every)
    assert _step_of(last) == STEPS_PER_EPOCH  # after epoch 1's validation (none at 14 yet)
    _assert_same_run(uninterrupted(WORKERS),
                     _train(setup_dirs, tmp_path / "b", monkeypatch, WORKERS, every), last)


def test_a_signal_at_an_epochs_last_step_stops_after_its_validation_and_the_next_step(
        setup_dirs, tmp_path, capsys, monkeypatch, uninterrupted):
    """SIGTERM at step 7, the last of epoch 1: the epoch's validation runs (its best
    checkpoint is written), the run stops at the end of step 8 and resumes from there."""
    out = tmp_path / "b"
    with monkeypatch.context() as m:
        signal_at_step(m, STEPS_PER_EPOCH, signal.SIGTERM)
        assert main(["train", *tiny_overrides(setup_dirs, out, *RUN, WORKERS)]) \
            == 128 + signal.SIGTERM
    stopped = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert stopped["global_step"] == STEPS_PER_EPOCH + 1
    best = list((out / "dual_gru" / "cpu-seed42" / "checkpoints").glob("best-*.ckpt"))
    assert [p.name for p in best] == [f"best-epoch=0-step={STEPS_PER_EPOCH}.ckpt"]
    last = Path(stopped["checkpoint"])
    _assert_same_run(uninterrupted(WORKERS), _train(setup_dirs, out, monkeypatch, WORKERS), last)


def test_killed_right_after_a_checkpoint_of_a_mid_epoch_validation(
        setup_dirs, tmp_path, monkeypatch):
    """Validation every half epoch: last.ckpt is written after each validation, inside the
    epoch too."""
    half = (WORKERS, "trainer.val_check_interval=0.5", "trainer.monitor=step")
    straight = _train(setup_dirs, tmp_path / "a", monkeypatch, *half)
    last = _killed(setup_dirs, tmp_path / "b", "last:1", *half)
    assert _step_of(last) == 10  # after the validation at step 3 of epoch 2
    _assert_same_run(straight, _train(setup_dirs, tmp_path / "b", monkeypatch, *half), last)


def test_an_epoch_that_does_not_improve_still_leaves_its_end_in_last_ckpt(
        setup_dirs, tmp_path, monkeypatch):
    """Only epoch 1's validation improves the monitored score: last.ckpt still holds the end
    of epoch 2 (a crash after it redoes nothing), the best checkpoint epoch 1's weights, and
    only last.ckpt holds the optimiser state."""
    from pytorch_lightning.callbacks import ModelCheckpoint

    from retrieval_qa.training.checkpoints import checkpoint_problem

    monkeypatch.setattr(ModelCheckpoint, "check_monitor_top_k",
                        lambda self, trainer, current=None: trainer.current_epoch == 0)
    report, _ = _train(setup_dirs, tmp_path, monkeypatch)
    folder = tmp_path / "dual_gru" / "cpu-seed42" / "checkpoints"
    best = folder / f"best-epoch=0-step={STEPS_PER_EPOCH}.ckpt"
    assert sorted(p.name for p in folder.glob("*.ckpt")) == [best.name, "last.ckpt"]
    assert report["best_training_checkpoint"] == str(best)
    assert _step_of(folder / "last.ckpt") == report["global_steps"] == 2 * STEPS_PER_EPOCH
    assert checkpoint_problem(folder / "last.ckpt") is None
    assert checkpoint_problem(best).startswith("weights only")
    assert best.stat().st_size < (folder / "last.ckpt").stat().st_size


def test_cuda_states_of_more_devices_than_visible_restore_those_present(monkeypatch, caplog):
    """A checkpoint written on two GPUs, resumed where one is visible: device 0's state is
    restored, the other is left out and a log line says so (set_rng_state_all over the saved
    list would raise an IndexError)."""
    torch.manual_seed(3)
    saved = [torch.full((16,), 1, dtype=torch.uint8), torch.full((16,), 2, dtype=torch.uint8)]
    states = {**rng_states(), "cuda": saved}
    torch.manual_seed(4)
    restored = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_rng_state",
                        lambda state, device="cuda": restored.append((device, state)))
    with caplog.at_level(logging.WARNING, logger=callbacks.__name__):
        set_rng_states(states)
    assert [device for device, _ in restored] == [0] and restored[0][1] is saved[0]
    assert torch.equal(torch.get_rng_state(), states["torch"])
    assert "2 device(s) and 1 are visible: restored those of the first 1 only" in caplog.text
