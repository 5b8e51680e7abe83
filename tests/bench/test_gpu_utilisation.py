"""bench/gpu_utilisation.py: the GPU utilisation sampler gives None (and why) without a GPU,
nvidia-smi or pynvml, and per-region figures from a stream."""

from __future__ import annotations

import time

import pytest
import torch

from bench import common
from bench.gpu_utilisation import Utilisation


def test_cpu_run_samples_nothing():
    with Utilisation(common.gpu_id(torch.device("cpu"))) as util, util.region("ours"):
        time.sleep(0.05)
    report = util.report(["ours", "st"])
    assert report["ours"] is None and report["st"] is None
    assert "cpu" in report["missing_because"]


def broken():
    raise ModuleNotFoundError("No module named 'pynvml'")


def test_no_nvidia_smi_and_no_nvml_gives_null():
    with Utilisation("0", nvidia_smi="no-such-nvidia-smi", poll=broken) as util, \
            util.region("ours"):
        time.sleep(0.05)
    assert util.summary("ours") is None
    assert "no no-such-nvidia-smi on PATH" in util.reason and "pynvml" in util.reason
    assert util.report(["ours"])["missing_because"] == util.reason


@pytest.mark.skipif(torch.cuda.is_available(), reason="torch.cuda.utilization may answer")
def test_default_source_without_a_gpu_gives_null():
    with Utilisation("0", nvidia_smi="no-such-nvidia-smi") as util, util.region("ours"):
        time.sleep(0.05)
    assert util.summary("ours") is None and "torch.cuda.utilization failed" in util.reason


def test_nvml_readings_are_credited_per_region():
    readings = iter(range(10_000))
    with Utilisation("0", interval_s=0.01, poll=lambda: next(readings)) as util:
        with util.region("ours"):
            time.sleep(0.2)
        time.sleep(0.1)  # outside any region: not counted
        with util.region("st"):
            time.sleep(0.2)
    ours, st = util.summary("ours"), util.summary("st")
    assert ours["samples"] >= 2 and st["samples"] >= 2
    assert ours["source"].startswith("torch.cuda.utilization")
    # readings are 0, 1, 2, ...: the source's probe took 0, those between the regions are gone
    taken, counted = max(util.samples["st"]) + 1, ours["samples"] + st["samples"]
    assert taken - counted >= 3
    assert max(util.samples["ours"]) < min(util.samples["st"])


def fake_smi(tmp_path, body: str):
    fake = tmp_path / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path / 'args'}\n{body}\n")
    fake.chmod(0o755)
    return fake


def test_nvidia_smi_when_nvml_is_missing(tmp_path):
    fake = fake_smi(tmp_path, "echo 40")
    with Utilisation("GPU-1234", interval_s=0.02, nvidia_smi=str(fake), poll=broken) as util:
        with util.region("ours"):
            time.sleep(0.3)
    ours = util.summary("ours")
    assert ours["mean_percent"] == ours["median_percent"] == 40.0 and ours["samples"] >= 2
    assert "nvidia-smi" in ours["source"] and "missing_because" not in util.report(["ours"])
    call = (tmp_path / "args").read_text().splitlines()[0]
    assert call == "--query-gpu=utilization.gpu --format=csv,noheader,nounits -i GPU-1234"


def test_nvidia_smi_without_the_gpu_gives_null(tmp_path):
    fake = fake_smi(tmp_path, "echo 'No devices were found'; exit 6")
    with Utilisation("GPU-1234", nvidia_smi=str(fake), poll=broken) as util, \
            util.region("ours"):
        time.sleep(0.05)
    assert util.summary("ours") is None and "gave no reading" in util.reason
