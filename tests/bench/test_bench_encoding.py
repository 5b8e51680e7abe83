"""bench/bench_encoding.py on the CPU, on a tiny random BERT and the synthetic SQuAD dev
file: both sides encode the same texts to the same vectors; the JSON fields."""

from __future__ import annotations

import json

import pytest

from bench import bench_encoding as bench


def test_encoding_bench(tiny_setup, tmp_path):
    path = tmp_path / "be.json"
    out = bench.main(["--device", "cpu", "--model", str(tiny_setup), "--n", "30",
                      "--n-questions", "20", "--rounds", "2", "--batch-size", "8",
                      "--chunk-rows", "4", "--out", str(path)])
    assert json.loads(path.read_text()) == json.loads(json.dumps(out))
    assert out["command"].startswith("python -m bench.bench_encoding --device cpu")
    assert out["device"]["type"] == "cpu" and out["settings"]["precision"] == "32"
    for side, n in (("answers", 30), ("questions", 20)):
        r = out[side]
        assert r["texts"] == n and r["max_abs_diff"] < 1e-5 and r["min_cosine"] > 0.9999
        assert r["ours_texts_per_s"] > 0 and r["sentence_transformers_texts_per_s"] > 0
        assert len(r["seconds_per_round"]["ours"]) == 3      # 1 warm-up round + 2
        assert len(r["ratio_per_round"]) == 3
    a = out["all"]
    assert [r["warm_up"] for r in a["rounds"]] == [True, False, False]
    warm = sorted(r["ratio_ours_over_st"] for r in a["rounds"][1:])
    assert a["ratio_ours_over_st"] == pytest.approx(sum(warm) / 2)  # the median of two
    assert "median of the 2 warm round(s)" in a["figure"]
    assert out["settings"]["warmup_rounds"] == 1
    util = out["gpu_utilization"]
    assert util["ours"] is None and util["sentence_transformers"] is None
    assert "cpu" in util["missing_because"]


def test_encoding_bench_bf16_autocast(tiny_setup, tmp_path, monkeypatch):
    used, real = [], bench.autocast

    def spy(device, precision):
        used.append((device.type, precision))
        return real(device, precision)

    monkeypatch.setattr(bench, "autocast", spy)
    out = bench.main(["--device", "cpu", "--precision", "bf16-mixed", "--model",
                      str(tiny_setup), "--n", "16", "--n-questions", "8", "--rounds", "1",
                      "--batch-size", "8", "--out", str(tmp_path / "be.json")])
    assert out["device"]["precision"] == "bf16-mixed"
    # every call of both sides under bf16 autocast: 2 sides x 2 text kinds, the warm-up
    # round and the round
    assert used == [("cpu", "bf16-mixed")] * 8
    assert out["answers"]["max_abs_diff"] < 0.05  # the same function in bf16
