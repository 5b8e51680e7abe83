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
