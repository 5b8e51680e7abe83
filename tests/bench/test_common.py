"""bench/common.py: devices and precisions, the command a result records, and the benches
run as modules of the bench package from the repository root, with no path insertion."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench import common

BENCH = Path(common.__file__).parent


def test_defaults_follow_the_machine():
    device, precision = common.resolve_device(None, None)
    if torch.cuda.is_available():
        assert (device.type, precision) == ("cuda", "bf16-mixed")
    else:
        assert (device.type, precision) == ("cpu", "32")
    assert common.resolve_device("cpu", None) == (torch.device("cpu"), "32")
    assert common.resolve_device("cpu", "bf16-mixed")[1] == "bf16-mixed"


def test_impossible_requests_are_clear_errors():
    with pytest.raises(SystemExit, match="16-mixed needs --device cuda"):
        common.resolve_device("cpu", "16-mixed")
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="no CUDA GPU"):
            common.resolve_device("cuda", None)


def test_autocast_and_scaler():
    cpu = torch.device("cpu")
    with common.autocast(cpu, "bf16-mixed"):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
    with common.autocast(cpu, "32"):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
    assert common.grad_scaler(cpu, "bf16-mixed") is None


def test_move_keeps_what_is_not_a_tensor():
    batch = {"a": [torch.ones(1), ("x", torch.zeros(1))], "modality": "text"}
    moved = common.move(batch, torch.device("cpu"))
    assert moved["modality"] == "text" and moved["a"][1][0] == "x"
    assert torch.equal(moved["a"][1][1], torch.zeros(1))


def test_command_names_the_module_and_its_arguments():
    assert common.command("bench.bench_x", ["--out", "a b.json"]) == \
        "python -m bench.bench_x --out 'a b.json'"


def test_a_bench_runs_as_a_module_from_the_root():
    done = subprocess.run([sys.executable, "-m", "bench.bench_training", "--help"],
                          cwd=common.ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "--loop {phases,trainer}" in done.stdout


def test_no_bench_edits_the_import_path():
    offenders = [p.name for p in BENCH.glob("*.py") if "sys.path" in p.read_text()]
    assert offenders == []


def test_every_result_file_names_its_device(tmp_path):
    """write_json adds the device a result ran on when it names none (the CPU's model here,
    no CUDA used), and keeps one it names."""
    import json

    common.write_json({"x": 1}, tmp_path / "a.json")
    device = json.loads((tmp_path / "a.json").read_text())["device"]
    assert device["type"] in ("cpu", "cuda") and device["name"]
    common.write_json({"device": {"type": "cuda", "name": "X"}}, tmp_path / "b.json")
    assert json.loads((tmp_path / "b.json").read_text())["device"]["name"] == "X"
