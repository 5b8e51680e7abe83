"""bench/training_phases.py (``--loop phases``, the CPU default of bench/bench_training.py) on
a tiny random BERT and the synthetic SQuAD files: a few steps, each phase timed, with their
JSON fields; the same-batches control gives both sides the same batches and tokens."""

from __future__ import annotations

from bench import bench_training
from bench.training_sides import PHASES

ARGS = ["--device", "cpu", "--batch-size", "8", "--steps", "2", "--warmup", "1"]


def test_phases_loop(tiny_setup, tmp_path, training_json):
    path = tmp_path / "bt.json"
    out = bench_training.main([*ARGS, "--model", str(tiny_setup), "--out", str(path)])
    training_json(out, path, "32")
    assert out["settings"]["loop"] == "phases" and out["settings"]["timed_steps"] == 2
    for side in ("ours", "sentence_transformers"):
        assert set(out["median_phase_s"][side]) == set(PHASES)
    tokens = out["settings"]["mean_tokens_per_step"]["ours"]
    assert 0 < tokens["real"] <= tokens["encoded"] <= tokens["padded"]


def test_same_batches_control(tiny_setup, tmp_path, training_json):
    path = tmp_path / "bt.json"
    out = bench_training.main([*ARGS, "--batches", "same", "--chunk-rows", "0",
                               "--model", str(tiny_setup), "--out", str(path)])
    training_json(out, path, "32")
    assert out["settings"]["batches"].startswith("the same batches for both sides")
    tokens = out["settings"]["mean_tokens_per_step"]
    # the same batches, no chunking: the same real and encoded tokens on both sides
    assert tokens["ours"]["real"] == tokens["sentence_transformers"]["real"]
    assert tokens["ours"]["encoded"] == tokens["sentence_transformers"]["encoded"]
