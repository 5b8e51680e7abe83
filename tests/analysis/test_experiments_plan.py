"""experiments/endx_analyses.py: the plan printed by --dry-run (nothing runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import load_experiment
from omegaconf import OmegaConf

from retrieval_qa.cli import build_parser
from retrieval_qa.training.compose import compose


@pytest.fixture
def script(monkeypatch):
    module = load_experiment("endx_analyses", monkeypatch)  # dataclasses look it up

    def refuse(*a, **kw):
        raise AssertionError("the dry run must not run anything")

    monkeypatch.setattr(module, "run_steps", refuse)  # the one runner: nothing starts
    return module


def dry_run(script, capsys, *argv) -> tuple[list[str], dict]:
    assert script.main(["--dry-run", *argv]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    return lines[:-1], json.loads(lines[-1])


def test_dry_run_plan(script, capsys, tmp_path):
    runs, res = tmp_path / "runs", tmp_path / "res"
    done = runs / "dual_gru" / "cpu-seed1" / "result.json"
    done.parent.mkdir(parents=True)
    done.write_text(json.dumps({"seconds": 12.0}))  # a finished run of the step's settings
    (done.parent / "config.yaml").write_text(OmegaConf.to_yaml(compose(
        ["experiment=dual_gru", "profile=cpu", "seed=1", f"output_dir={runs}"])))
    lines, out = dry_run(script, capsys, "--seeds", "1,2", "--runs-dir", str(runs),
                         "--results-dir", str(res))
    assert out["dry_run"] and out["steps"] == 24 and out["done"] == 1 and out["todo"] == 23
    plan = {p["key"]: p for p in out["plan"]}
    assert len(lines) == 24 and lines[0].startswith("[done] train/dual_gru/seed1: rqa train ")
    trains = [p for p in out["plan"] if p["key"].startswith("train/")]
    assert len(trains) == 4 * 2 + 4 * 2  # 4 experiments x 2 seeds + 4 ablations x 2 seeds
    assert plan["train/endx_bert/seed2"]["command"] == (
        f"rqa train experiment=endx_bert profile=cpu seed=2 output_dir={runs}")
    wo = plan["train/endx_gru_ablation/wo_aq/seed1"]
    assert "model.gam.final.aq=0" in wo["command"]
    assert f"output_dir={runs / 'endx_gru_ablation' / 'wo_aq'}" in wo["command"]
    assert set(plan) >= {"analyze/one-to-many", "analyze/ablation", "analyze/similarity/gru",
                         "analyze/similarity/bert", "analyze/tsne/gru", "analyze/tsne/bert",
                         "analyze/bertqa"}
    assert plan["analyze/one-to-many"]["command"].count("--model") == 4 * 2
    side = plan["analyze/side-by-side"]["command"]
    assert side.count("--report") == 4 * 2 and "--model" not in side
    assert f"Dual-GRUs={runs / 'dual_gru' / 'cpu-seed1' / 'result.json'}" in side
    assert plan["analyze/bertqa"]["command"].count("--model") == 2 * 2  # bert family
    assert plan["analyze/ablation"]["command"].count("--report") == 6 * 2
    # every planned command is a valid `rqa` command line / override list
    parser = build_parser()
    for step in script.build_plan(script.parse_args(["--seeds", "1,2", "--runs-dir", str(runs),
                                                     "--results-dir", str(res)])):
        if step.kind == "train":
            cfg = compose(step.args[1:])
            assert cfg.seed in (1, 2) and cfg.profile == "cpu"
        else:
            assert parser.parse_args(step.args).command == "analyze"


def test_a_run_of_other_settings_is_not_taken_for_the_steps(script, capsys, tmp_path):
    runs = tmp_path / "runs"
    argv = ["--seeds", "1", "--families", "gru", "--ablation-experiment", "", "--runs-dir",
            str(runs), "--results-dir", str(tmp_path / "res"), "--only", "train/dual_gru"]
    folder = runs / "dual_gru" / "cpu-seed1"
    folder.mkdir(parents=True)
    (folder / "result.json").write_text("{}")
    (folder / "config.yaml").write_text(OmegaConf.to_yaml(compose(
        ["experiment=dual_gru", "profile=cpu", "seed=1", f"output_dir={runs}",
         "trainer.max_steps=20"])))
    lines, out = dry_run(script, capsys, *argv)
    assert lines == [f"[other settings] {out['plan'][0]['key']}: {out['plan'][0]['command']}"]
    assert script.main(argv) == 2  # nothing runs (subprocess.run refuses)
    assert "trainer.max_steps: 20 -> -1" in capsys.readouterr().err


def test_finished_analysis_is_skipped_unless_forced(script, capsys, tmp_path):
    res = tmp_path / "res"
    argv = ["--seeds", "7", "--families", "gru", "--ablation-experiment", "",
            "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(res),
            "--only", "analyze/tsne"]
    _, out = dry_run(script, capsys, *argv)
    (step,) = out["plan"]
    assert step["status"] == "todo" and step["key"] == "analyze/tsne/gru"
    Path(step["output"]).parent.mkdir(parents=True)
    Path(step["output"]).write_text("{}")
    (res / "commands.json").write_text(json.dumps(
        {step["key"]: {"command": step["command"], "status": "ok"}}))
    assert dry_run(script, capsys, *argv)[1]["plan"][0]["status"] == "done"
    assert dry_run(script, capsys, *argv, "--force")[1]["plan"][0]["status"] == "todo"
    (res / "commands.json").write_text(json.dumps(
        {step["key"]: {"command": step["command"] + " --seed 3", "status": "ok"}}))
    assert dry_run(script, capsys, *argv)[1]["plan"][0]["status"] == "todo"  # changed command


def test_family_overrides_reach_only_that_familys_runs(script, capsys, tmp_path):
    argv = ["--seeds", "1", "--ablation-experiment", "", "--runs-dir", str(tmp_path / "runs"),
            "--results-dir", str(tmp_path / "res"), "--overrides",
            "bert:data.max_train_pairs=4000", "--only", "train/"]
    plan = {p["key"]: p["command"] for p in dry_run(script, capsys, *argv)[1]["plan"]}
    assert plan["train/dual_bert/seed1"].endswith("data.max_train_pairs=4000")
    assert plan["train/endx_bert/seed1"].endswith("data.max_train_pairs=4000")
    assert "max_train_pairs" not in plan["train/endx_gru/seed1"]
    with pytest.raises(SystemExit, match="FAMILY:key=value"):
        script.main(["--dry-run", "--overrides", "bart:data.batch_size=8"])


def test_command_log_is_merged_between_queues(script, tmp_path):
    script._write_log(tmp_path, {"train/a": {"command": "rqa train a", "status": "ok"}})
    script._write_log(tmp_path, {"train/b": {"command": "rqa train b", "status": "ok"}})
    log = json.loads((tmp_path / "commands.json").read_text())
    assert set(log) == {"train/a", "train/b"}
    assert "`rqa train a`" in (tmp_path / "commands.md").read_text()
