"""Figure 4: t-SNE of questions sharing one answer, one panel per model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from retrieval_qa.analysis.tsne import default_perplexity, tsne_2d


def test_tsne_end_to_end(env, tmp_path, rqa, assert_png):
    out = rqa("analyze", "tsne", "--model", f"Dual-GRUs={env.dual['checkpoint']}",
              "--model", f"ENDX-GRUs={env.endx['checkpoint']}", "--data-dir", env.data,
              "--output-dir", tmp_path)
    assert out["questions"] == 6 and set(out["compactness"]) == {"Dual-GRUs", "ENDX-GRUs"}
    assert_png(tmp_path / "figure4.png")
    data = json.loads((tmp_path / "figure4.json").read_text())
    assert [p["model"] for p in data["panels"]] == ["Dual-GRUs", "ENDX-GRUs"]
    for p in data["panels"]:
        xy = np.array(p["questions_xy"] + [p["answer_xy"]])
        assert xy.shape == (7, 2) and xy.min() >= 0 and xy.max() <= 1
        assert p["perplexity"] == 2.0
        assert p["original_space"]["mean_qa_distance"] >= 0


def test_tsne_perplexity_is_checked():
    assert default_perplexity(7) == 2.0 and default_perplexity(1000) == 30.0
    with pytest.raises(ValueError, match="perplexity"):
        tsne_2d(np.zeros((4, 3)), perplexity=5)


def test_the_figures_label_their_axes_and_colourbars(tmp_path, monkeypatch):
    """Figure 3's colourbars name the score each heatmap shows and its axes the questions;
    Figure 4's axes are the t-SNE coordinates; its legend sits above the points."""
    import torch

    from retrieval_qa.analysis import similarity, tsne
    from retrieval_qa.analysis.common import pyplot

    plt, figures = pyplot(), []
    monkeypatch.setattr(plt, "close", figures.append)
    m = torch.eye(3, dtype=torch.float64)
    similarity._figure3({k: m for k, _ in similarity.PANELS}, tmp_path / "f3.png", "answer",
                        {"cross_endx": "20 x cosine", "dual_endx": "1 x inner product",
                         "dual_baseline": "1 x inner product"})
    tsne._figure4([{"model": "Dual", "questions_xy": [[0, 0], [1, 1]], "answer_xy": [0.5, 1]}],
                  tmp_path / "f4.png")
    f3, f4 = figures
    heatmaps, bars = f3.axes[:3], f3.axes[3:]
    assert [b.get_ylabel() for b in bars] == ["similarity (20 x cosine)",
                                              "similarity (1 x inner product)",
                                              "similarity (1 x inner product)"]
    assert all(ax.get_xlabel() == ax.get_ylabel() == "question" for ax in heatmaps)
    (ax,) = f4.axes
    assert ax.get_xlabel().startswith("t-SNE 1") and ax.get_ylabel().startswith("t-SNE 2")
    assert ax.get_ylim()[1] > 1.1  # room above the points for the legend
