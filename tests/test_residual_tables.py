"""experiments/residual_tables.py renders results/residual/tables.md from the committed rows
alone (nothing recomputed): every layout, each trained row with its number of seeds."""

import json
from pathlib import Path

from experiments import residual_tables as R


def test_tables_render_from_the_committed_rows(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("recomputed a committed row")

    monkeypatch.setattr(R, "evaluate_paragraph_task", boom)
    monkeypatch.setattr(R, "task_embeddings", boom)
    monkeypatch.setattr(R, "_rqa_json", boom)
    rows = R.OUT / "rows"
    frozen = R.frozen_rows(rows)
    assert set(frozen) == {(k, i) for k in R.STATIC for i in (False, True)}
    trained = R.trained_rows(rows, [], [], "cpu", Path("unused"))
    assert len(trained["fcrr_both", "cpu"]) == 3 and len(trained["fcrr_quadratic", "cpu"]) >= 1
    refined = R.reqa_refined_rows(rows, trained, compute=False)
    assert len(refined["fcrr", "paper"]) == 3      # ReQA through each seed's refiner
    md = R.write_tables(frozen, R.frozen_p2q(rows, frozen), R.reqa_rows(rows), trained,
                        json.loads((rows / "minilm_layers.json").read_text()), refined)
    for heading in ("Tables 3-6", "Table 7", "Table 2", "Table 9 layout", "Table 10 layout",
                    "Same embeddings on ReQA SQuAD"):
        assert f"## {heading}" in md
    assert "| spaCy md 300d w/ IDF (frozen) |" in md and "| FCRR (paragraph side) |" in md
    assert "14.65 | 42.70 | 3 | 10 |" in md        # both sides beside the paper's Table 10 row
    assert "| FCRR (paragraph side) | cpu |" in md   # each trained row says its profile
    assert "| FCRR over GloVe 6B 50d w/ IDF | paper |" in md
