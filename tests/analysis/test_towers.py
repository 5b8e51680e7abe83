"""SDE/ADE Figure 2: t-SNE of both towers' embeddings, with the same-tower neighbour share."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from retrieval_qa.analysis.towers import knn_same_side, tower_geometry


def test_knn_same_side_disjoint_and_mixed():
    side = np.array([0] * 4 + [1] * 4)
    far = np.concatenate([np.zeros((4, 2)) + np.arange(4)[:, None] * 0.01,
                          np.full((4, 2), 100.0) + np.arange(4)[:, None] * 0.01])
    assert knn_same_side(far, side, k=3) == 1.0
    # each point has its other-side twin nearest, the rest far: one of k=1 is the other side
    twins = np.repeat(np.arange(4)[:, None] * 10.0, 2, axis=0) + np.array([[0.0], [0.1]] * 4)
    assert knn_same_side(twins, np.array([0, 1] * 4), k=1) == 0.0
    with pytest.raises(ValueError, match="k must be"):
        knn_same_side(far, side, k=8)


def test_tower_geometry_by_hand():
    q = torch.tensor([[0.0, 0.0], [2.0, 0.0]])
    a = torch.tensor([[0.0, 1.0], [2.0, 1.0]])
    g = tower_geometry(q, a)
    assert g["centroid_distance"] == 1.0 and g["mean_pair_distance"] == 1.0
    assert g["mean_random_distance"] == pytest.approx(5 ** 0.5)


def test_towers_end_to_end(env, tmp_path, rqa, assert_png, capsys):
    out = rqa("analyze", "towers", "--model", f"Dual-GRUs={env.dual['checkpoint']}",
              "--model", f"ENDX-GRUs={env.endx['checkpoint']}", "--pairs", "10", "--k", "3",
              "--data-dir", env.data, "--output-dir", tmp_path)
    assert out["pairs"] == 10 and set(out["models"]) == {"Dual-GRUs", "ENDX-GRUs"}
    assert out["models"]["Dual-GRUs"]["sharing"] == "sde"
    assert_png(tmp_path / "figure2.png")
    data = json.loads((tmp_path / "figure2.json").read_text())
    for p in data["panels"]:
        xy = np.array(p["questions_xy"] + p["answers_xy"])
        assert xy.shape == (20, 2) and xy.min() >= 0 and xy.max() <= 1
        assert all(0 <= v <= 1 for v in p["knn_same_tower"].values())
    from retrieval_qa.cli import main

    code = main(["analyze", "towers", "--model", f"D={env.dual['checkpoint']}", "--pairs", "1000",
                 "--data-dir", str(env.data), "--output-dir", str(tmp_path)])
    assert code == 2 and "distinct questions" in capsys.readouterr().err
