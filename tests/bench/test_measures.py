"""bench/measures.py: the model FLOPs of a training step counted by hand for a tiny encoder,
the peak of each device named, MFU, and rounds: every round reported, the figure the median
of the warm ones."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bench import measures as M


def test_training_flops_by_hand():
    config = SimpleNamespace(num_hidden_layers=2, hidden_size=4, intermediate_size=16)
    # weights: 2 layers x (4*4*4 + 2*4*16) = 2 x 192 = 384; texts of 3 and 5 real tokens
    forward = 2 * 384 * 8 + 4 * 2 * 4 * (9 + 25) + 2 * 1 * 1 * 4
    assert M.training_flops(config, real=8, real_sq=34, batch=1) == 3 * forward
    assert M.layer_weights(config) == (2, 4, 384)


def test_peaks_and_mfu():
    assert M.peak_tflops("NVIDIA H200") == (989.0, "H200")
    assert M.peak_tflops("NVIDIA H100 80GB HBM3") == (989.0, "H100")
    assert M.peak_tflops("NVIDIA H100 PCIe")[0] == 756.0
    assert M.peak_tflops("NVIDIA H200 NVL")[0] == 835.0
    assert M.peak_tflops("NVIDIA A100-SXM4-80GB")[0] == 312.0
    assert M.peak_tflops("Some GPU")[0] is None
    u = M.utilisation(2e12, 50.0, "NVIDIA H200")       # 2 TFLOP a step, 50 steps/s
    assert u["achieved_tflops"] == pytest.approx(100.0)
    assert u["mfu"] == pytest.approx(100 / 989)
    assert M.utilisation(1e9, 1.0, None)["mfu"] is None


def test_rounds_summary_and_bounds():
    assert M.round_bounds(10, 300, 3) == [10, 110, 210, 310]
    assert M.round_bounds(1, 2, 5) == [1, 2, 3]                  # no round without steps
    summary = M.rounds_summary({"ours": [4.0, 1.0, 2.0, 1.0],
                                "sentence_transformers": [8.0, 2.0, 2.0, 3.0]},
                               [100] * 4, warmup_rounds=1)
    assert [r["warm_up"] for r in summary["rounds"]] == [True, False, False, False]
    assert summary["ratio_per_round"] == [2.0, 2.0, 1.0, 3.0]
    assert summary["ratio_ours_over_st"] == 2.0                  # median of 2, 1, 3
    assert summary["ours_rate"] == 100.0 and summary["sentence_transformers_rate"] == 50.0
