"""Running `rqa sweep`: a 2-run grid of tiny models runs end to end (offline wandb files in the
run folders, the comparison table), a second invocation runs nothing, and a run folder of other
settings or damaged state stops the sweep before anything runs."""

from __future__ import annotations

import csv
import json
import shlex
from pathlib import Path

import pytest
import yaml
from helpers import tiny_overrides  # setup_dirs: tests/sweeps/conftest.py
from omegaconf import OmegaConf

from retrieval_qa.cli import main
from retrieval_qa.sweeps import run as sweep_mod
from retrieval_qa.sweeps.run import run_sweep
from retrieval_qa.sweeps.runner import Call
from retrieval_qa.training.compose import compose


def _tiny_sweep(setup_dirs, tmp_path) -> Path:
    """A 2-run grid (two pooler hop counts, one seed) of tiny GRU towers, one epoch each."""
    words = [o for o in tiny_overrides(setup_dirs, tmp_path / "unused", "trainer.max_epochs=1")
             if not o.startswith(("logger.", "output_dir=", "model.towers.pooler.hops="))]
    sweep = {"name": "tiny", "program": "rqa", "method": "grid",
             "metric": {"name": "test/mrr", "goal": "maximize"},
             "command": ["rqa", "train", *words, "logger=wandb", "logger.mode=online",
                         "${args_no_hyphens}"],
             "parameters": {"model.towers.pooler.hops": {"values": [1, 2]},
                            "seed": {"values": [7]}}}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(sweep))
    return path


def test_rqa_sweep_runs_a_grid_end_to_end_and_resumes(setup_dirs, tmp_path, monkeypatch,
                                                      capsys):
    monkeypatch.setenv("RQA_THREADS", "1")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    path = _tiny_sweep(setup_dirs, tmp_path)
    out = tmp_path / "sweeps"
    assert main(["sweep", str(path), "--output-dir", str(out), "--in-process"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert summary["counts"] == {"finished": 2} and summary["swept"] == ["model.towers.pooler.hops"]
    assert "run 1/2 starting" in captured.err and "[1 done, 0 running, 1 left" in captured.err
    for run, hops in zip(summary["runs"], (1, 2), strict=True):
        run_dir = Path(run["run_dir"])
        assert run_dir == out / "tiny" / f"hops={hops}" / "dual_gru" / "cpu-seed7"
        result = json.loads((run_dir / "result.json").read_text())
        assert run["metric"] == result["test"]["metrics"]["mrr"]
        assert yaml.safe_load((run_dir / "config.yaml").read_text())["model"]["towers"][
            "pooler"]["hops"] == hops
        offline = list((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
        assert offline, f"no offline wandb run under {run_dir}"
        assert "train/loss" in (run_dir / "logs" / "version_0" / "metrics.csv").read_text()
        info = json.loads((run_dir / "sweep.json").read_text())
        assert info["params"] == {"model.towers.pooler.hops": hops, "seed": 7}
        assert f"model.towers.pooler.hops={hops}" in info["agent_command"]
    table = (out / "tiny" / "sweep_table.md").read_text()
    assert "| model.towers.pooler.hops | MRR |" in table and "| 1/1" in table
    assert summary["table"] and summary["best"]["setting"] in ("hops=1", "hops=2")

    # again: both runs have their result.json, nothing is trained
    for runner in ("_train", "_train_in_process"):
        monkeypatch.setattr(sweep_mod, runner, lambda run: pytest.fail("a finished run ran again"))
    again = run_sweep(path, output_dir=out)
    assert again["counts"] == {"reused": 2}
    assert [r["metric"] for r in again["runs"]] == [r["metric"] for r in summary["runs"]]

    # the sweep file changed (a fixed setting): its runs are not passed off as the new ones
    changed = yaml.safe_load(path.read_text())
    changed["command"].insert(-1, "data.batch_size=4")
    path.write_text(yaml.safe_dump(changed))
    before = sorted((p, p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file())
    assert main(["sweep", str(path), "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert "2 run folder(s) hold runs of other settings" in err
    assert "data.batch_size: 8 -> 4" in err and "--output-dir" in err
    assert sorted((p, p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()) == before

    assert main(["analyze", "side-by-side", "--sweep", str(out / "tiny"), "--metrics",
                 "p@1,mrr", "--last-logged", "train/loss", "--output-dir",
                 str(tmp_path / "tables")]) == 0
    rows = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["rows"]
    assert set(rows) == {"hops=1", "hops=2"} and set(rows["hops=1"]) == {"p@1", "mrr"}
    full = json.loads((tmp_path / "tables" / "sweep_table.json").read_text())["rows"]
    for row, run in zip(full, summary["runs"], strict=True):
        with (Path(run["run_dir"]) / "logs" / "version_0" / "metrics.csv").open() as f:
            losses = [float(r["train/loss"]) for r in csv.DictReader(f) if r["train/loss"]]
        assert row["last_logged"]["train/loss"]["mean"] == pytest.approx(losses[-1], abs=1e-4)
    assert "| last train/loss |" in (tmp_path / "tables" / "sweep_table.md").read_text()


def test_count_dry_run_failures_and_interrupts(setup_dirs, tmp_path, monkeypatch):
    path = _tiny_sweep(setup_dirs, tmp_path)
    out = tmp_path / "sweeps"
    plan = run_sweep(path, output_dir=out, dry_run=True)
    assert plan["counts"] == {"planned": 2} and not out.exists()
    assert plan["runs"][0]["command"].endswith(f"output_dir={out / 'tiny' / 'hops=1'}")

    calls = []

    def fail(run):
        calls.append(run.index)
        return Call(lambda: 1)

    monkeypatch.setattr(sweep_mod, "_train", fail)
    summary = run_sweep(path, output_dir=out, count=1)
    assert calls == [1] and summary["counts"] == {"failed": 1, "not run": 1}
    assert summary["exit_code"] == 1

    monkeypatch.setattr(sweep_mod, "_train",
                        lambda run: Call(lambda: (calls.append(run.index), 130)[1]))
    summary = run_sweep(path, output_dir=out)
    assert calls == [1, 1] and summary["interrupted"] and summary["exit_code"] == 130
    assert summary["counts"] == {"interrupted": 1, "not run": 1}


def test_a_dry_runs_command_runs_as_printed_into_the_sweeps_run_folder(setup_dirs, tmp_path,
                                                                      monkeypatch, capsys):
    monkeypatch.setenv("RQA_THREADS", "1")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    path = _tiny_sweep(setup_dirs, tmp_path)
    out = tmp_path / "sweeps"
    assert main(["sweep", str(path), "--output-dir", str(out), "--dry-run"]) == 0
    plan = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(plan["commands"]) == {"command", "agent_command"}  # what each one is
    first = plan["runs"][0]
    # what `wandb agent` runs: online, its folder named by the agent's run id
    assert "logger.mode=online" in first["agent_command"]
    words = shlex.split(first["command"])  # what runs here: one shell line, nothing to fill in
    assert words[:2] == ["rqa", "train"] and "${" not in first["command"]
    assert "logger.mode=offline" in words and "logger.mode=online" not in words
    assert main(words[1:]) == 0  # run as printed
    run_dir = Path(json.loads(capsys.readouterr().out.strip().splitlines()[-1])["checkpoint"]).parent
    assert run_dir == Path(first["run_dir"]) and list((run_dir / "wandb").glob("offline-run-*"))
    again = run_sweep(path, output_dir=out, dry_run=True)  # the sweep's own run: not run again
    assert [r["status"] for r in again["runs"]] == ["reused", "planned"]


def test_runs_picks_run_numbers_in_the_given_order_into_the_full_grids_folders(
        setup_dirs, tmp_path, monkeypatch, capsys):
    path = _tiny_sweep(setup_dirs, tmp_path)
    out = tmp_path / "sweeps"
    calls = []
    monkeypatch.setattr(sweep_mod, "_train",
                        lambda run: Call(lambda: (calls.append(run.index), 1)[1]))
    summary = run_sweep(path, output_dir=out, only=[2, 1])
    assert calls == [2, 1]  # the order asked for, not the grid's
    calls.clear()
    summary = run_sweep(path, output_dir=out, only=[2])
    assert calls == [2] and [r["status"] for r in summary["runs"]] == ["not run", "failed"]
    assert "[0 done, 1 running, 0 left, 1 not in this call;" in capsys.readouterr().err
    assert summary["runs"][1]["run_dir"] == str(out / "tiny" / "hops=2" / "dual_gru" / "cpu-seed7")
    with pytest.raises(ValueError, match="runs 1 to 2; --runs names \\[3\\]"):
        run_sweep(path, output_dir=out, only=[3])


def _finished(run):
    """A stand-in for `rqa train`: the run's config and report, as a finished run leaves
    them."""
    Path(run.run_dir).mkdir(parents=True, exist_ok=True)
    (Path(run.run_dir) / "config.yaml").write_text(OmegaConf.to_yaml(run.config))
    (Path(run.run_dir) / "result.json").write_text(json.dumps(
        {"experiment": "dual_gru", "profile": "cpu", "seed": 7,
         "test": {"metrics": {"mrr": 10.0 + run.index}}}))
    return Call(lambda: 0)


@pytest.mark.parametrize("name", ["result.json", "sweep.json"])
@pytest.mark.parametrize("how", ["truncated", "empty", "garbage"])
def test_damaged_state_of_a_finished_run_is_refused(setup_dirs, tmp_path, monkeypatch, capsys,
                                                    name, how):
    path = _tiny_sweep(setup_dirs, tmp_path)
    out = tmp_path / "sweeps"
    monkeypatch.setattr(sweep_mod, "_train", _finished)
    assert run_sweep(path, output_dir=out)["counts"] == {"finished": 2}
    run_dir = out / "tiny" / "hops=1" / "dual_gru" / "cpu-seed7"
    damaged = run_dir / name
    data = damaged.read_bytes()
    damaged.write_bytes({"truncated": data[:len(data) // 2], "empty": b"",
                         "garbage": bytes(range(256)) * 4}[how])
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    monkeypatch.setattr(sweep_mod, "_train", lambda run: pytest.fail("ran"))
    capsys.readouterr()
    assert main(["sweep", str(path), "--output-dir", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert str(damaged) in captured.err and "damaged" in captured.err
    assert "run the same `rqa" in captured.err  # the fix
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before  # nothing lost
    code = main(["analyze", "side-by-side", "--sweep", str(out / "tiny"), "--output-dir",
                 str(tmp_path / "tables")])
    assert code == 2 and str(damaged) in capsys.readouterr().err


def test_a_run_in_a_subprocess_as_wandb_agent_runs_it(setup_dirs, tmp_path, monkeypatch):
    monkeypatch.setenv("RQA_THREADS", "1")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    out = tmp_path / "sweeps"
    summary = run_sweep(_tiny_sweep(setup_dirs, tmp_path), output_dir=out, count=1)
    assert summary["counts"] == {"finished": 1, "not run": 1}
    run_dir = Path(summary["runs"][0]["run_dir"])
    assert (run_dir / "result.json").is_file() and list((run_dir / "wandb").glob("offline-run-*"))


def test_the_wandb_logger_takes_the_sweeps_group(setup_dirs, tmp_path):
    from retrieval_qa.training.trainer import build_logger

    overrides = [o for o in tiny_overrides(setup_dirs, tmp_path) if not o.startswith("logger.")]
    cfg = compose([*overrides, "logger=wandb", "logger.group=my_sweep"])
    wandb, csv_copy = build_logger(cfg, tmp_path)  # the wandb run starts only when first used
    assert wandb._wandb_init["group"] == "my_sweep"
    assert Path(csv_copy.log_dir).parent == tmp_path / "logs"  # logger.csv_copy: the CSV too
    alone = build_logger(compose([*overrides, "logger=wandb", "logger.csv_copy=false"]), tmp_path)
    assert alone._wandb_init["project"] == "retrieval-qa"
    assert "group" not in compose(overrides).logger  # csv logger: composed without it


def test_a_value_out_of_range_stops_the_sweep_before_any_run(tmp_path, capsys):
    sweep = {"name": "bad", "program": "rqa", "method": "grid",
             "metric": {"name": "test/mrr", "goal": "maximize"},
             "command": ["rqa", "train", "experiment=dual_gru", "profile=cpu",
                         "${args_no_hyphens}"],
             "parameters": {"data.batch_size": {"values": [8, -3]}}}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(sweep))
    out = tmp_path / "sweeps"
    assert main(["sweep", str(path), "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert "sweep bad, run 2 ({'data.batch_size': -3}): data.batch_size=-3 (set on the " \
           "command line) is out of range: data.batch_size takes an integer >= 1" in err
    assert not out.exists()  # the first run did not start either
