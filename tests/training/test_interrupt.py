"""The `rqa train` contract around stops and short runs: SIGTERM/SIGINT mid-epoch save a
checkpoint, exit non-zero with JSON, and the resumed run ends exactly where an uninterrupted
run does; periodic checkpoints inside an epoch; validation in a run that max_steps cuts short;
with `logger=wandb` (offline) the JSON is still the last line of stdout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import KILLER, signal_at_step, tiny, tiny_overrides

from retrieval_qa.cli import main
from retrieval_qa.training.compose import compose, compose_traced
from retrieval_qa.training.resumable_checkpoints import ResumableCheckpoints
from retrieval_qa.training.run import train

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_mid_epoch_saves_exits_nonzero_and_resumes_to_the_same_result(
        setup_dirs, tmp_path, capsys, monkeypatch, signum):
    straight = train(tiny(setup_dirs, tmp_path / "a", "test_after_fit=false"))
    signal_at_step(monkeypatch, 5, signum)
    code = main(["train", *tiny_overrides(setup_dirs, tmp_path / "b", "test_after_fit=false")])
    out = capsys.readouterr().out.strip().splitlines()
    stopped = json.loads(out[-1])
    assert code == 128 + signum
    assert stopped["interrupted"] is True and stopped["global_step"] == 5
    assert Path(stopped["checkpoint"]).name == "last.ckpt"
    assert Path(stopped["checkpoint"]).is_file()
    assert signal.getsignal(signal.SIGTERM) is not None  # handlers restored
    monkeypatch.undo()
    resumed = train(tiny(setup_dirs, tmp_path / "b", "test_after_fit=false"))
    assert resumed["resumed_from"] == stopped["checkpoint"]
    assert resumed["global_steps"] == straight["global_steps"]
    a = torch.load(f"{straight['checkpoint']}/towers.pt")
    b = torch.load(f"{resumed['checkpoint']}/towers.pt")
    for k in a:
        torch.testing.assert_close(a[k], b[k], msg=k)
    # exact: restart parity, the same computation (shapes, batches, threads) in one process
    assert resumed["best_val_score"] == straight["best_val_score"]


def test_endx_killed_mid_epoch_resumes_to_the_weights_of_an_uninterrupted_run(
        setup_dirs, tmp_path, capsys, monkeypatch):
    """Restart parity for ENDX too: its GAM weights ramp with the fractional epoch, so the
    resumed run must pick up the ramp at the step it stopped."""
    endx = ("experiment=endx_gru", "test_after_fit=false", "model.cross.cross_attention.dropout=0.0")

    def overrides(out):
        return [endx[0], *(o for o in tiny_overrides(setup_dirs, out, *endx[1:])
                           if o != "experiment=dual_gru")]

    straight = train(compose(overrides(tmp_path / "a")))
    signal_at_step(monkeypatch, 5, signal.SIGTERM)
    assert main(["train", *overrides(tmp_path / "b")]) == 128 + signal.SIGTERM
    capsys.readouterr()
    monkeypatch.undo()
    resumed = train(compose(overrides(tmp_path / "b")))
    assert resumed["resumed_from"] and resumed["global_steps"] == straight["global_steps"]
    a = torch.load(f"{straight['checkpoint']}/towers.pt")
    b = torch.load(f"{resumed['checkpoint']}/towers.pt")
    for k in a:
        torch.testing.assert_close(a[k], b[k], msg=k)
    # exact: restart parity, the same computation (shapes, batches, threads) in one process
    assert resumed["best_val_score"] == straight["best_val_score"]


def test_periodic_checkpoint_inside_the_epoch(setup_dirs, tmp_path):
    seen = []
    original = ResumableCheckpoints.save

    def save(self, trainer):
        seen.append(trainer.global_step)
        return original(self, trainer)

    ResumableCheckpoints.save = save
    try:
        train(tiny(setup_dirs, tmp_path, "test_after_fit=false", "trainer.max_epochs=1",
                   "trainer.checkpoint_every_n_steps=4"))
    finally:
        ResumableCheckpoints.save = original
    assert seen[:2] == [4, 8]


def test_max_steps_inside_the_first_epoch_still_validates(setup_dirs, tmp_path):
    report = train(tiny(setup_dirs, tmp_path, "test_after_fit=false", "trainer.max_steps=3"))
    assert report["global_steps"] == 3
    assert report["best_val_score"] is not None and "val/r@1" in report["last_val"]
    assert report["best_training_checkpoint"]


def test_description_states_overrides_of_the_profile(setup_dirs, tmp_path, capsys):
    report = train(compose_traced(tiny_overrides(setup_dirs, tmp_path, "test_after_fit=false",
                                                 "trainer.max_epochs=1")))
    err = capsys.readouterr().err
    assert "data.max_val_questions=None (profile: 1000)" in report["description"]
    # the settings the profile does not name, as given; not where the run goes
    others = report["description"].split("[set on the command line: ", 1)[1]
    assert "data.max_question_length=16" in others and "test_after_fit=false" in others
    assert "trainer.max_epochs" not in others  # a profile key, at the profile's value
    assert "output_dir=" not in others and "seed=" not in others
    assert report["profile_settings"]["data.batch_size"] == 8
    assert err.index("profile settings in effect") < err.index("Epoch 1/1") if "Epoch" in err \
        else "profile settings in effect" in err


def test_wandb_offline_json_is_the_last_line_of_stdout(setup_dirs, tmp_path):
    pytest.importorskip("wandb")
    overrides = [o for o in tiny_overrides(setup_dirs, tmp_path, "test_after_fit=false",
                                           "trainer.max_epochs=1",
                                           "trainer.enable_progress_bar=true")
                 if o != "logger.name=none"]
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path),
           "WANDB_SILENT": "false", "PYTHONPATH": str(REPO), "RQA_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "retrieval_qa.cli", "train", *overrides,
                           "logger=wandb"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout  # nothing but the JSON on stdout
    report = json.loads(lines[-1])
    assert report["global_steps"] > 0
    assert "wandb" in proc.stderr.lower() and "Epoch 1/1" in proc.stderr


def test_hard_kill_between_periodic_checkpoints_resumes_to_the_same_weights(
        setup_dirs, tmp_path, monkeypatch):
    """SIGKILL at step 6 of a run with dropout that checkpoints every 4 steps: a new process
    resumes from step 4 and ends with the weights of an uninterrupted run, because the
    checkpoint carries the random-number states (without them dropout draws other masks
    after the restart, and the weights differ: checked too)."""
    extra = ("test_after_fit=false", "model.towers.encoder.dropout=0.3",
             "trainer.checkpoint_every_n_steps=4", "trainer.checkpoint_every_minutes=0",
             "trainer.weights_every_minutes=0", "trainer.max_epochs=1",
             "threads=1")  # the killed process too: the same computation in every run
    straight = train(tiny(setup_dirs, tmp_path / "a", *extra))
    assert straight["global_steps"] > 8
    killed = tiny_overrides(setup_dirs, tmp_path / "b", *extra)
    env = {**os.environ, "PYTHONPATH": str(REPO), "RQA_THREADS": "1", "KILL": "step:6"}
    proc = subprocess.run([sys.executable, "-c", KILLER, *killed], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    last = tmp_path / "b" / "dual_gru" / "cpu-seed42" / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=False)["global_step"] == 4
    backup = last.read_bytes()
    resumed = train(tiny(setup_dirs, tmp_path / "b", *extra))
    assert resumed["resumed_from"] == str(last)
    assert resumed["global_steps"] == straight["global_steps"]
    a = torch.load(f"{straight['checkpoint']}/towers.pt")
    b = torch.load(f"{resumed['checkpoint']}/towers.pt")
    for k in a:
        torch.testing.assert_close(a[k], b[k], msg=k)

    # the same resume without the saved random-number states ends elsewhere
    (tmp_path / "c" / "dual_gru" / "cpu-seed42" / "checkpoints").mkdir(parents=True)
    (tmp_path / "c" / "dual_gru" / "cpu-seed42" / "checkpoints" / "last.ckpt").write_bytes(backup)
    (tmp_path / "c" / "dual_gru" / "cpu-seed42" / "config.yaml").write_bytes(
        (last.parents[1] / "config.yaml").read_bytes())  # the run's settings: resumable
    monkeypatch.setattr(ResumableCheckpoints, "load_state_dict", lambda self, state: None)
    other = train(tiny(setup_dirs, tmp_path / "c", *extra))
    c = torch.load(f"{other['checkpoint']}/towers.pt")
    assert any(not torch.allclose(a[k], c[k]) for k in a)


def test_checkpoints_by_time_at_the_check_interval_with_weights_only_between(
        setup_dirs, tmp_path, monkeypatch):
    """The clock is read every ``log_every_n_steps`` steps: with a due time that is always
    past, the resumable checkpoint is written at each such step; with only the weights due,
    a weights-only file is written instead (no optimiser state), and the resumable one only
    after the epoch's validation."""
    seen = []
    original = ResumableCheckpoints.save
    monkeypatch.setattr(ResumableCheckpoints, "save", lambda self, trainer: (
        seen.append(trainer.global_step), original(self, trainer))[1])
    train(tiny(setup_dirs, tmp_path / "a", "test_after_fit=false", "trainer.max_epochs=1",
               "trainer.log_every_n_steps=3", "trainer.checkpoint_every_minutes=1e-9",
               "trainer.weights_every_minutes=0"))
    assert seen[:3] == [3, 6, 9]
    seen.clear()
    report = train(tiny(setup_dirs, tmp_path / "b", "test_after_fit=false",
                        "trainer.max_epochs=1", "trainer.log_every_n_steps=3",
                        "trainer.checkpoint_every_minutes=60",
                        "trainer.weights_every_minutes=1e-9"))
    assert seen == [report["global_steps"]]  # only the weights were due before the end
    weights = torch.load(tmp_path / "b" / "dual_gru" / "cpu-seed42" / "checkpoints" /
                         "last-weights.ckpt", weights_only=False)
    assert "state_dict" in weights and "optimizer_states" not in weights


def test_compile_falls_back_to_eager_where_compiling_fails(setup_dirs, tmp_path, monkeypatch,
                                                          caplog):
    """``trainer.compile=true`` with a compiler that fails: the run trains and tests in
    eager mode to the same weights as an uncompiled run."""
    import torch._dynamo

    from retrieval_qa.training import compile as compile_module

    calls = []

    def broken_backend(graph, example_inputs):
        calls.append(len(example_inputs))
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(compile_module, "BACKEND", broken_backend)
    monkeypatch.setattr(torch._dynamo.config, "suppress_errors", False)
    plain = train(tiny(setup_dirs, tmp_path / "a", "trainer.max_epochs=1"))
    torch._dynamo.reset()
    compiled = train(tiny(setup_dirs, tmp_path / "b", "trainer.max_epochs=1",
                          "trainer.compile=true"))
    torch._dynamo.reset()
    assert calls  # compiling was tried, failed, and the run went on in eager mode
    # exact: the fallback runs the same eager kernels on the same shapes in this process
    assert compiled["test"]["metrics"] == plain["test"]["metrics"]
    a = torch.load(f"{plain['checkpoint']}/towers.pt")
    b = torch.load(f"{compiled['checkpoint']}/towers.pt")
    assert a.keys() == b.keys()  # in place: the same parameter names
    for k in a:
        torch.testing.assert_close(a[k], b[k], msg=k)


def test_compile_rejects_an_unknown_mode(setup_dirs, tmp_path):
    with pytest.raises(ValueError, match="trainer.compile='fast'"):
        train(tiny(setup_dirs, tmp_path, "trainer.compile=fast"))
