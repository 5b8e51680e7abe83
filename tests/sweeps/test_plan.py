"""Planning `rqa sweep`: every file of conf/sweeps passes wandb's own sweep-config checks and
composes at every grid point; the runs are proposed as wandb's engine proposes them, and each
run's command is the one `wandb agent` runs."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from retrieval_qa.sweeps.plan import (
    agent_command,
    check_sweep,
    find_sweep_file,
    load_sweep,
    local_problems,
    metric_value,
    plan_runs,
    propose,
    setting_label,
    wandb_violations,
)
from retrieval_qa.training.compose import compose

REPO = Path(__file__).resolve().parents[2]
SWEEP_FILES = sorted((REPO / "conf" / "sweeps").glob("*.yaml"))


def test_there_are_sweep_files():
    names = {p.stem for p in SWEEP_FILES}
    assert {"sde_ade", "endx_confounds", "dual_vs_endx", "vaes"} <= names


@pytest.mark.parametrize("path", SWEEP_FILES, ids=lambda p: p.stem)
def test_every_sweep_file_passes_wandbs_checks(path):
    sweep = load_sweep(path)
    assert wandb_violations(sweep) == []  # wandb's local-controller (jsonschema) check
    assert local_problems(sweep) == []
    assert sweep["name"] == path.stem and sweep["metric"]["name"] in ("test/mrr", "val/r@1")
    # `wandb agent` runs `rqa train ... key=value` unchanged (online), the runner offline
    assert sweep["command"][:2] == ["rqa", "train"] and "${args_no_hyphens}" in sweep["command"]
    # online, one folder per wandb run: the agent sets WANDB_RUN_ID for the run's process
    folder = f"output_dir=runs/sweeps/{path.stem}/${{oc.env:WANDB_RUN_ID,no-agent}}"
    assert folder in sweep["command"]


@pytest.mark.parametrize("path", SWEEP_FILES, ids=lambda p: p.stem)
def test_every_run_of_every_sweep_composes_with_its_values(path, tmp_path):
    sweep = load_sweep(path)
    runs = plan_runs(sweep, path.stem, tmp_path)  # composes each run: a bad key raises
    assert len({r.run_dir for r in runs}) == len(runs)  # one folder per run
    for r in runs:
        cfg = r.config  # composed from r.overrides (once per setting: the seed changes no key)
        for name, value in r.params.items():
            if name == "seed":
                assert r.run_dir.endswith(f"-seed{value}")
            elif name == "experiment":
                assert cfg.experiment == value
            elif isinstance(value, dict):  # a dict value sets those keys of the node
                node = OmegaConf.to_container(OmegaConf.select(cfg, name), resolve=True)
                assert {k: node[k] for k in value} == value, (name, node)
            else:
                assert OmegaConf.select(cfg, name) == value, name
        assert cfg.logger._target_.endswith(".wandb_logger") and cfg.logger.mode == "offline"
        assert cfg.logger.group == sweep["name"]
    # the shell line of a run composes to the run's own config: nothing for an agent to fill
    assert "${" not in runs[0].train_command
    assert compose(shlex.split(runs[0].train_command)[2:]) == runs[0].config


def test_under_wandb_agent_each_run_has_its_own_folder(monkeypatch):
    sweep = load_sweep(find_sweep_file("endx_confounds"))
    params = propose(sweep)[0]
    words = agent_command(sweep, params)[2:]  # what `wandb agent` runs after `rqa train`
    monkeypatch.setenv("WANDB_RUN_ID", "abc123")
    assert compose(words).output_dir == "runs/sweeps/endx_confounds/abc123"


def test_wandbs_check_rejects_a_broken_file():
    broken = {"method": "grd", "parameters": {"seed": {"valus": [1, 2]}},
              "metric": {"name": "test/mrr", "goal": "up"}, "command": ["python", "x.py"]}
    violations = wandb_violations(broken)
    assert any("grd" in v for v in violations) and any("up" in v for v in violations)
    assert local_problems(broken)  # not `rqa train ... ${args_no_hyphens}`
    with pytest.raises(ValueError, match="grd"):
        check_sweep(broken)
    typo = {"method": "grid", "parameters": {"seed": {"value": 1}},
            "command": ["rqa", "train", "${args}"]}
    assert wandb_violations(typo) == [] and any("${args}" in p for p in local_problems(typo))
    as_string = {"method": "grid", "command": ["rqa", "train", "${args_no_hyphens}"],
                 "parameters": {"model.gam.final.qq": {"values": ["1e4", 1.0]}}}
    assert any("1e4" in p for p in local_problems(as_string))  # YAML reads 1e4 as a string


def test_agent_command_is_what_wandb_agent_runs():
    sweep = {"command": ["${env}", "rqa", "train", "profile=cpu", "${args_no_hyphens}"]}
    params = {"model.gam.detach_cross": False, "model.gam.final": {"qq": 1.0, "aa": 1.0},
              "seed": 2}
    assert agent_command(sweep, params) == [
        "rqa", "train", "profile=cpu", "model.gam.detach_cross=False",
        "model.gam.final={'qq': 1.0, 'aa': 1.0}", "seed=2"]


def test_grid_random_and_bayes_proposals():
    grid = {"method": "grid", "parameters": {"a": {"values": [1, 2]}, "seed": {"values": [1, 2]},
                                             "c": {"value": "x"}}}
    assert propose(grid) == [{"a": 1, "c": "x", "seed": 1}, {"a": 1, "c": "x", "seed": 2},
                             {"a": 2, "c": "x", "seed": 1}, {"a": 2, "c": "x", "seed": 2}]
    rand = {"method": "random", "parameters": {
        "lr": {"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-2},
        "b": {"values": ["p", "q", "r"]}}}
    first = propose(rand, count=5, seed=3)
    assert first == propose(rand, count=5, seed=3)  # seeded: a rerun proposes the same runs
    assert propose(rand, count=8, seed=3)[:5] == first  # and a longer one extends it
    assert first != propose(rand, count=5, seed=4)
    assert all(1e-4 <= r["lr"] <= 1e-2 and isinstance(r["lr"], float) for r in first)
    with pytest.raises(ValueError, match="--count"):
        propose(rand)
    bayes = {**rand, "method": "bayes", "metric": {"name": "test/mrr", "goal": "maximize"}}
    with pytest.raises(ValueError, match="wandb agent"):
        propose(bayes, count=2)
    assert len(propose(bayes, method="random", count=2)) == 2


def test_setting_labels_and_metric_values():
    assert setting_label({}) == "default"
    assert setting_label({"model.gam.final": {"qq": 1.0, "aa": 1.0},
                          "model.gam.detach_cross": True}) == "final=qq-1+aa-1,detach_cross=True"
    assert setting_label({"a.x": 1, "b.x": 2}) == "a.x=1,b.x=2"  # same tail: full keys
    assert len(setting_label({f"k{i}": "v" * 20 for i in range(10)})) <= 120
    report = {"test": {"metrics": {"mrr": 30.0}}, "monitor": "val/r@1", "best_val_score": 25.0,
              "last_val": {"val/r@1": 20.0, "val/mrr": 31.0}}
    assert metric_value(report, "test/mrr") == 30.0
    assert metric_value(report, "val/r@1") == 25.0  # the monitored one: best, as selected
    assert metric_value(report, "val/mrr") == 31.0 and metric_value(report, None) is None


def test_sweep_names_resolve_to_conf_sweeps():
    assert find_sweep_file("vaes") == REPO / "conf" / "sweeps" / "vaes.yaml"
    with pytest.raises(FileNotFoundError, match="sde_ade"):
        find_sweep_file("no_such_sweep")
