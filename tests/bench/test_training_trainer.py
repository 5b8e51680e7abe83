"""bench/training_trainer.py (``--loop trainer``, the CUDA default of bench/bench_training.py)
on a tiny random BERT and the synthetic SQuAD files: ours in a Lightning Trainer, a few steps
under bf16 autocast on the CPU, with their JSON fields."""

from __future__ import annotations

import pytest

from bench import bench_training


def test_trainer_loop_bf16(tiny_setup, tmp_path, training_json):
    path = tmp_path / "bt.json"
    out = bench_training.main(["--device", "cpu", "--precision", "bf16-mixed", "--loop",
                               "trainer", "--model", str(tiny_setup), "--batch-size", "8",
                               "--steps", "2", "--warmup", "1", "--out", str(path)])
    training_json(out, path, "bf16-mixed")
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


def test_trainer_loop_needs_a_warmup_step(tiny_setup, tmp_path):
    with pytest.raises(SystemExit, match="--warmup >= 1"):
        bench_training.main(["--device", "cpu", "--loop", "trainer", "--model",
                             str(tiny_setup), "--warmup", "0", "--out", str(tmp_path / "x.json")])
