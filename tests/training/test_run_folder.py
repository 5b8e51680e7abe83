"""A run never passes off another run's result: `rqa train` resumes or reuses a run folder only
when the run there was started with the same settings (the neutral ones aside), refuses other
settings before anything is written, starts over cleanly with resume=never, and passes over a
damaged last.ckpt for the newest resumable checkpoint (or refuses, naming the files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import tiny, tiny_overrides
from omegaconf import OmegaConf

from retrieval_qa.cli import main
from retrieval_qa.training import run_folder
from retrieval_qa.training.checkpoints import checkpoint_problem, resumable_checkpoint
from retrieval_qa.training.compose import compose

SHORT = ("trainer.max_steps=3", "trainer.max_epochs=1")


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time (what "nothing
    changed" compares)."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def _rqa(capsys, *argv) -> tuple[int, dict | None, str]:
    code = main(["train", *argv])
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    return code, json.loads(lines[-1]) if lines else None, captured.err


@pytest.fixture
def short_run(setup_dirs, tmp_path, capsys):
    """A finished smoke run (3 steps) in tmp_path/runs."""
    code, report, _ = _rqa(capsys, *tiny_overrides(setup_dirs, tmp_path / "runs", *SHORT))
    assert code == 0 and report["global_steps"] == 3
    return tmp_path / "runs", report


def test_a_smoke_run_then_the_full_command_is_refused_and_nothing_changes(
        setup_dirs, short_run, capsys):
    out, _ = short_run
    before = _files(out)
    code, report, err = _rqa(capsys, *tiny_overrides(setup_dirs, out))  # the full run
    assert code == 2 and report is None
    line = err.strip().splitlines()[-1]
    assert line.startswith("rqa: error:") and "other settings" in line
    assert "trainer.max_steps: 3 -> -1" in line and "trainer.max_epochs: 1 -> 2" in line
    assert "output_dir=" in line and "resume=never" in line
    assert _files(out) == before


def test_the_same_command_again_reuses_the_finished_run(setup_dirs, short_run, capsys):
    out, first = short_run
    before = _files(out)
    # settings that cannot change the result may differ (progress bar, threads, workers...)
    code, report, err = _rqa(capsys, *tiny_overrides(setup_dirs, out, *SHORT),
                             "trainer.enable_progress_bar=true", "threads=1",
                             "data.num_workers=1", "trainer.checkpoint_every_n_steps=1",
                             "logger.name=csv")
    assert code == 0 and "reused" in err
    assert report == {**first, "reused": True}
    assert _files(out) == before


def test_resume_never_starts_the_folder_over(setup_dirs, short_run, capsys):
    out, first = short_run
    run = Path(first["checkpoint"]).parent
    old_best = Path(first["best_training_checkpoint"]).name
    (run / "sweep.json").write_text("{}")  # the sweep's request: kept
    (run / "dev.json").write_text("{}")  # a study's evaluation of the old model: removed
    code, report, err = _rqa(capsys, *tiny_overrides(setup_dirs, out, "trainer.max_steps=5",
                                                     "resume=never"))
    assert code == 0 and "removed the earlier run's" in err
    assert report["global_steps"] == 5 and report["resumed_from"] is None
    assert not (run / "checkpoints" / old_best).exists()
    assert OmegaConf.load(run / "config.yaml").trainer.max_steps == 5
    assert (run / "sweep.json").is_file() and not (run / "dev.json").exists()
    # and that run is now the folder's: the same command reuses it
    code, again, err = _rqa(capsys, *tiny_overrides(setup_dirs, out, "trainer.max_steps=5"))
    assert code == 0 and again["reused"] is True and "reused" in err


def test_an_older_folder_is_compared_by_its_config_yaml(setup_dirs, short_run, capsys):
    """A config.yaml of an earlier version, without a key conf/ has now: the run is not
    passed off as this command's (the key is named as not set)."""
    out, first = short_run
    config = Path(first["checkpoint"]).parent / "config.yaml"
    old = OmegaConf.load(config)
    del old.data["bucket_unit"]
    config.write_text(OmegaConf.to_yaml(old))
    code, _, err = _rqa(capsys, *tiny_overrides(setup_dirs, out, *SHORT))
    assert code == 2 and 'data.bucket_unit: (not set) -> "chars"' in err
    config.write_text("trainer: [unclosed\n")  # a damaged config.yaml: named, not a traceback
    code, _, err = _rqa(capsys, *tiny_overrides(setup_dirs, out, *SHORT))
    assert code == 2 and "config.yaml" in err and "unreadable" in err


def test_differences_leave_out_the_neutral_settings_only(setup_dirs, tmp_path):
    base = tiny(setup_dirs, tmp_path)
    same = tiny(setup_dirs, tmp_path / "elsewhere", "trainer.enable_progress_bar=true",
                "data.pin_memory=false", "trainer.weights_every_minutes=0", "resume=never",
                "trainer.log_every_n_steps=3", "description=other words")
    assert run_folder.differences(base, same) == {}
    other = tiny(setup_dirs, tmp_path, "seed=3", "data.eval_batch_size=7")
    assert set(run_folder.differences(base, other)) == {"seed", "data.sampler_seed",
                                                        "data.eval_batch_size"}


def _unfinished_run(setup_dirs, out, capsys) -> tuple[Path, dict]:
    """A run that trained to its end but died before its result (no result.json): the same
    command resumes it from its checkpoints. Returns its folder and report."""
    code, report, _ = _rqa(capsys, *tiny_overrides(setup_dirs, out, "test_after_fit=false"))
    assert code == 0
    run = Path(report["checkpoint"]).parent
    (run / "result.json").unlink()
    return run, report


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage"])
def test_a_damaged_last_checkpoint_falls_back_to_the_newest_resumable_one(
        setup_dirs, tmp_path, capsys, damage):
    run, first = _unfinished_run(setup_dirs, tmp_path, capsys)
    last = run / "checkpoints" / "last.ckpt"
    best = next((run / "checkpoints").glob("best-*.ckpt"))
    copy = run / "checkpoints" / "copy.ckpt"  # a resumable copy of the run's state
    data = last.read_bytes()
    copy.write_bytes(data)
    last.write_bytes({"empty": b"", "truncated": data[:len(data) // 2],
                      "garbage": b"\x13not a checkpoint\x00" * 64}[damage])
    assert checkpoint_problem(last) is not None and checkpoint_problem(copy) is None
    assert checkpoint_problem(best).startswith("weights only")  # never resumed from
    code, report, err = _rqa(capsys, *tiny_overrides(setup_dirs, tmp_path,
                                                     "test_after_fit=false"))
    assert code == 0 and report["resumed_from"] == str(copy)
    assert "last.ckpt" in err and "passed over" in err and copy.name in err
    assert report["global_steps"] == first["global_steps"]  # trained on to the run's end


def test_a_damaged_last_checkpoint_beside_best_weights_only_is_refused(
        setup_dirs, tmp_path, capsys):
    """The best checkpoints hold weights only: they cannot resume the run, and the command
    says so instead of restarting it silently."""
    run, _ = _unfinished_run(setup_dirs, tmp_path, capsys)
    last = run / "checkpoints" / "last.ckpt"
    last.write_bytes(b"")
    before = _files(tmp_path)
    code, _, err = _rqa(capsys, *tiny_overrides(setup_dirs, tmp_path, "test_after_fit=false"))
    line = err.strip().splitlines()[-1]
    assert code == 2 and str(last) in line and "empty" in line
    assert "best-" in line and "weights only" in line and "resume=never" in line
    assert _files(tmp_path) == before


def test_a_folder_of_weights_only_checkpoints_starts_the_run_with_a_note(tmp_path):
    """Killed after a best checkpoint and before the first last.ckpt: nothing can resume the
    run, nothing is damaged; it starts from its beginning and says why."""
    import torch

    folder = tmp_path / "checkpoints"
    folder.mkdir()
    best = folder / "best-epoch=0-step=7.ckpt"
    torch.save({"state_dict": {"w": torch.zeros(2)}, "epoch": 0, "global_step": 7}, best)
    checkpoint, notes = resumable_checkpoint(folder, "unused")
    assert checkpoint is None and len(notes) == 1
    assert str(best) in notes[0] and "weights only" in notes[0] and "beginning" in notes[0]


def test_no_whole_checkpoint_is_refused_naming_the_file(setup_dirs, tmp_path, capsys):
    run, _ = _unfinished_run(setup_dirs, tmp_path, capsys)
    last = run / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:1000])
    for best in (run / "checkpoints").glob("best-*.ckpt"):
        best.write_bytes(b"")
    before = _files(tmp_path)
    code, _, err = _rqa(capsys, *tiny_overrides(setup_dirs, tmp_path, "test_after_fit=false"))
    line = err.strip().splitlines()[-1]
    assert code == 2 and str(last) in line and "not a checkpoint archive" in line
    assert "empty" in line and "resume=never" in line
    assert _files(tmp_path) == before


def test_a_damaged_checkpoint_given_explicitly_is_refused(setup_dirs, tmp_path, capsys):
    bad = tmp_path / "given.ckpt"
    bad.write_bytes(b"PK\x03\x04 half a zip")
    code, _, err = _rqa(capsys, *tiny_overrides(setup_dirs, tmp_path / "runs",
                                                f"resume={bad}"))
    assert code == 2 and str(bad) in err and "resume=" in err
    assert not (tmp_path / "runs").exists()


def test_a_checkpoint_of_a_run_of_other_settings_is_refused(setup_dirs, short_run, capsys):
    out, first = short_run
    last = Path(first["checkpoint"]).parent / "checkpoints" / "last.ckpt"
    code, _, err = _rqa(capsys, *tiny_overrides(setup_dirs, out.parent / "new",
                                                f"resume={last}"))
    assert code == 2 and "trainer.max_steps: 3 -> -1" in err
    assert not (out.parent / "new").exists()


def test_a_damaged_best_checkpoint_after_fit_is_named(setup_dirs, tmp_path, capsys):
    run, _ = _unfinished_run(setup_dirs, tmp_path, capsys)
    best = next((run / "checkpoints").glob("best-*.ckpt"))
    best.write_bytes(best.read_bytes()[:-100])
    code, _, err = _rqa(capsys, *tiny_overrides(setup_dirs, tmp_path, "test_after_fit=false"))
    assert code == 2 and str(best) in err and "best checkpoint" in err


def test_compose_of_the_same_overrides_finds_the_same_folder(setup_dirs, tmp_path):
    cfg = compose(tiny_overrides(setup_dirs, tmp_path, "seed=5"))
    assert run_folder.run_dir(cfg) == tmp_path / "dual_gru" / "cpu-seed5"


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage", "tokenizer"])
def test_a_damaged_export_is_named_by_rqa_evaluate(setup_dirs, tmp_path, capsys, damage):
    from retrieval_qa.training.run import export_untrained

    folder = Path(export_untrained(tiny(setup_dirs, tmp_path), tmp_path / "model")["checkpoint"])
    weights = folder / "towers.pt"
    damaged = {"empty": (weights, b""), "truncated": (weights, weights.read_bytes()[:200]),
               "garbage": (weights, b"\x80\x02garbage" * 50),
               "tokenizer": (folder / "tokenizer" / "tokenizer.json", b"{not json")}[damage]
    damaged[0].write_bytes(damaged[1])
    code = main(["evaluate", "--checkpoint", str(folder), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and err.startswith("rqa: error:")
    assert str(damaged[0] if damage != "tokenizer" else folder) in err
    assert "export the model again" in err
