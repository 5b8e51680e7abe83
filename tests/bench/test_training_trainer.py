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


def test_trainer_loop_matched_rounds_and_flops(tiny_setup, tmp_path, training_json):
    """``--setup matched``: ST's batches tokenised before the clock (and padded as ours, the
    tiny profile: no multiple); the timed steps in rounds, each side's figure their median;
    model FLOPs and TFLOP/s per side, MFU null on a CPU (no peak), and why."""
    path = tmp_path / "bt.json"
    out = bench_training.main(["--device", "cpu", "--loop", "trainer", "--setup", "matched",
                               "--model", str(tiny_setup), "--batch-size", "8", "--steps", "4",
                               "--rounds", "2", "--warmup", "1", "--out", str(path)])
    training_json(out, path, "32")
    s = out["settings"]
    assert s["setup"] == "matched" and s["st_pretokenized_batches"] == 5
    assert s["st_compile"] is None and s["rounds"] == 2 and "before the clock" in \
        s["sentence_transformers_runs"]
    for side in ("ours", "sentence_transformers"):
        figures = out["sides"][side]
        assert figures["round_steps"] == [2, 2] and len(figures["round_steps_per_s"]) == 2
        assert figures["steps_per_s"] == pytest.approx(
            sorted(figures["round_steps_per_s"])[0] / 2 + sorted(figures["round_steps_per_s"])[1] / 2)
        assert figures["model_tflop_per_step"] > 0 and figures["achieved_tflops"] > 0
        assert figures["mfu"] is None and "no device name" in figures["mfu_missing_because"]
    assert len(out["ratio_per_round"]) == 2
    assert "not how many SMs" in out["gpu_utilization"]["measures"]
