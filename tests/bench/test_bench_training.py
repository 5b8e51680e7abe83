"""bench/bench_training.py on the CPU, on a tiny random BERT and the synthetic SQuAD files:
the per-phase loop (the CPU default) and the Lightning Trainer loop (the GPU default), a few
steps each, with their JSON fields."""

from __future__ import annotations

import json
import math

from helpers import load_bench


def common_checks(out: dict, path, precision: str) -> None:
    assert json.loads(path.read_text()) == json.loads(json.dumps(out))
    assert out["device"] == {"type": "cpu", "precision": precision,
                             "name": out["machine"]["cpu"]}
    for package in ("torch", "transformers", "sentence_transformers", "pytorch_lightning"):
        assert out["machine"][package]
    check = out["first_batch_check"]
    assert check["same_input_ids"] and check["same_initial_weights"]
    assert check["loss_abs_diff"] < 1e-5 and check["grad_relative_diff"] < 1e-3
    for side in ("ours", "sentence_transformers"):
        assert out[f"{side}_steps_per_s"] > 0
        assert math.isclose(out[f"{side}_pairs_per_s"],
                            out[f"{side}_steps_per_s"] * out["settings"]["batch_size"])
        assert math.isfinite(out["mean_train_loss"][side])
        assert out["gpu_utilization"][side] is None  # on the CPU: null, and why
    assert math.isclose(out["ratio_ours_over_st"], out["ours_steps_per_s"]
                        / out["sentence_transformers_steps_per_s"])
    assert "cpu" in out["gpu_utilization"]["missing_because"]


def test_phases_loop(tiny_setup, tmp_path, monkeypatch):
    bench = load_bench("bench_training", monkeypatch)
    path = tmp_path / "bt.json"
    out = bench.main(["--device", "cpu", "--model", str(tiny_setup), "--batch-size", "8",
                      "--steps", "2", "--warmup", "1", "--out", str(path)])
    common_checks(out, path, "32")
    assert out["settings"]["loop"] == "phases" and out["settings"]["timed_steps"] == 2
    for side in ("ours", "sentence_transformers"):
        assert set(out["median_phase_s"][side]) == set(bench.PHASES)
    tokens = out["settings"]["mean_tokens_per_step"]["ours"]
    assert 0 < tokens["real"] <= tokens["encoded"] <= tokens["padded"]


def test_trainer_loop_bf16(tiny_setup, tmp_path, monkeypatch):
    bench = load_bench("bench_training", monkeypatch)
    path = tmp_path / "bt.json"
    out = bench.main(["--device", "cpu", "--precision", "bf16-mixed", "--loop", "trainer",
                      "--model", str(tiny_setup), "--batch-size", "8", "--steps", "2",
                      "--warmup", "1", "--out", str(path)])
    common_checks(out, path, "bf16-mixed")
    s = out["settings"]
    assert (s["loop"], s["experiment"], s["profile"]) == ("trainer", "dual_bert", "cpu")
    assert f"model.towers.encoder.pretrained={tiny_setup}" in s["config_overrides"]
    args = s["trainer_args"]
    assert args["precision"] == "bf16-mixed" and args["accelerator"] == "cpu"
    assert args["max_steps"] == 3 and args["limit_val_batches"] == 0
    assert args["enable_checkpointing"] is False
    assert s["data_loader"]["class"] == "ResumableDataLoader"
    assert s["data_loader"]["num_workers"] == 0  # the config's (conf/data/reqa_squad.yaml)
    assert s["pairs_in_pool"] == s["train_pairs"]["pairs"]


def test_trainer_loop_needs_a_warmup_step(tiny_setup, tmp_path, monkeypatch):
    import pytest

    bench = load_bench("bench_training", monkeypatch)
    with pytest.raises(SystemExit, match="--warmup >= 1"):
        bench.main(["--device", "cpu", "--loop", "trainer", "--model", str(tiny_setup),
                    "--warmup", "0", "--out", str(tmp_path / "x.json")])
