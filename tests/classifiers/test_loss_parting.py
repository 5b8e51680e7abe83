"""experiments/loss_parting.py: two trainings' per-step losses read from their checkpoints and
compared step by step (the first differing step, the drift per stretch), and a checkpoint
without them refused with its path named."""

from __future__ import annotations

import pytest
import torch

from experiments import loss_parting as P


def saved(path, losses, name="LossRecorder{'total': 4}"):
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"callbacks": {name: {"losses": losses}}}, path)
    return path


def test_the_first_differing_step_and_the_drift_per_stretch():
    a, b = [1.0, 0.5, 0.25, 0.125, 0.1], [1.0, 0.5, 0.375, 0.125]
    out = P.parting(a, b, every=2)
    assert out["steps_compared"] == 4 and out["steps"] == [5, 4]
    assert out["first_differing_step"] == 3
    assert out["stretches"] == [
        {"steps": [1, 2], "max_abs": 0.0, "mean_abs": 0.0},
        {"steps": [3, 4], "max_abs": 0.125, "mean_abs": 0.0625}]
    assert P.parting(a, a)["first_differing_step"] is None


def test_a_run_folder_or_its_checkpoint_is_read_and_one_without_losses_refused(tmp_path):
    saved(tmp_path / "run" / "checkpoints" / "last.ckpt", [1.5, 1.25])
    assert P.step_losses(tmp_path / "run") == [1.5, 1.25]
    out = P.main([str(tmp_path / "run"), str(tmp_path / "run" / "checkpoints" / "last.ckpt"),
                  "--output", str(tmp_path / "out.json")])
    assert out["first_differing_step"] is None and (tmp_path / "out.json").is_file()
    assert out["machines"] == [None, None]  # no training.json beside either
    other = saved(tmp_path / "other.ckpt", [1.0], name="ModelCheckpoint")
    with pytest.raises(SystemExit, match="other.ckpt keeps no per-step losses"):
        P.step_losses(other)
    with pytest.raises(SystemExit, match="no checkpoint at"):
        P.step_losses(tmp_path / "missing")
