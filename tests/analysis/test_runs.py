"""Side-by-side table from training reports (plain dicts; no model is run)."""

from __future__ import annotations

import json

import pytest

from retrieval_qa.analysis.runs import load_reports, side_by_side_table


def _report(exp, seed, mrr, seconds, pairs=4000, steps=125):
    return {"experiment": exp, "seed": seed, "profile": "cpu", "description": f"{exp} profile.",
            "pretrained": "minilm", "best_val_score": mrr + 1, "train_seconds": seconds,
            "global_steps": steps, "data": {"train": {"pairs": pairs}},
            "test": {"dataset": "reqa_squad", "pool": "dev",
                     "metrics": {"mrr": mrr, "r@1": mrr - 10, "r@5": mrr + 10}}}


def test_side_by_side_mean_spread_and_settings(tmp_path):
    reports = {"Dual-BERTs": [_report("dual_bert", 1, 70.0, 400), _report("dual_bert", 2, 72.0, 420)],
               "ENDX-BERTs": [_report("endx_bert", 1, 71.0, 900)]}
    out = side_by_side_table(reports, output_dir=tmp_path, tag="bert")
    assert out["rows"]["Dual-BERTs"] == {"mrr": 71.0, "r@1": 61.0, "r@5": 81.0}
    data = json.loads((tmp_path / "side_by_side_bert.json").read_text())
    dual = data["rows"][0]
    assert dual["seeds"] == [1, 2] and dual["train_seconds"]["mean"] == 410.0
    assert dual["mrr"]["std"] == pytest.approx(1.4142, abs=1e-4) and dual["train_pairs"] == [4000]
    md = (tmp_path / "side_by_side_bert.md").read_text()
    assert "| Dual-BERTs | 71.00 ± 1.41 | 61.00 ± 1.41 | 81.00 ± 1.41 | 72.00 ± 1.41 | 410 ± 14 |" in md
    assert "| 71.06 / 61.24 / 83.09 |" in md and data["rows"][0]["paper"]["mrr"] == 71.06
    assert "| ENDX-BERTs | 71.00 | 61.00 | 81.00 | 72.00 | 900 | 1 | 1 | 4000 | 125 | 73.43 / 63.94" in md
    assert "Test pool: reqa_squad/dev" in md and "endx_bert profile." in md


def test_reports_from_run_folders_and_missing_ones(tmp_path):
    run = tmp_path / "dual_gru" / "cpu-seed1"
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps(_report("dual_gru", 1, 20.0, 100)))
    loaded = load_reports([("Dual-GRUs", str(run)), ("Dual-GRUs", str(run / "result.json"))])
    assert [r["seed"] for r in loaded["Dual-GRUs"]] == [1, 1]
    with pytest.raises(FileNotFoundError, match="no result.json"):
        load_reports([("ENDX-GRUs", str(tmp_path / "endx_gru" / "cpu-seed1"))])


def test_side_by_side_command_on_real_reports(env, tmp_path, rqa):
    out = rqa("analyze", "side-by-side", "--report", f"Dual-GRUs={env.dual['checkpoint']}/..",
              "--report", f"ENDX-GRUs={env.endx_run}", "--tag", "gru", "--output-dir", tmp_path)
    assert out["rows"]["ENDX-GRUs"]["mrr"] == env.endx["test"]["metrics"]["mrr"]
    md = (tmp_path / "side_by_side_gru.md").read_text()
    assert "| Dual-GRUs |" in md and "55.24 / 44.39 / 68.00" in md


def test_run_config_beside_the_report_gives_the_gam_weights(tmp_path):
    run = tmp_path / "endx_gru" / "cpu-seed1"
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps(_report("endx_gru", 1, 25.0, 700)))
    (run / "config.yaml").write_text("model:\n  gam:\n    final: {qq: 1.0, aa: 1.0, aq: 0.5, qa: 0.5}\n")
    side_by_side_table(load_reports([("ENDX-GRUs", str(run))]), output_dir=tmp_path)
    md = (tmp_path / "side_by_side.md").read_text()
    assert 'endx_gru profile. Encoder: minilm. GAM final weights: {"aa": 1.0, "aq": 0.5' in md


def test_each_report_is_committed_beside_the_table_and_reads_back(tmp_path):
    """runs/<table>/<method>/<experiment>-seed<seed>/result.json per report, without the
    checkpoint paths; the same table comes back from those files alone."""
    first = {**_report("dual_bert", 1, 70.0, 400), "checkpoint": "runs/dual_bert/cpu-seed1/model",
             "best_training_checkpoint": "runs/x/best.ckpt", "resumed_from": None}
    reports = {"Dual-BERTs": [first, _report("dual_bert", 2, 72.0, 420)],
               "ENDX-BERTs": [_report("endx_bert", 1, 71.0, 900)]}
    out = side_by_side_table(reports, output_dir=tmp_path / "results", tag="bert")
    copies = tmp_path / "results" / "runs" / "side_by_side_bert"
    assert sorted(str(p.relative_to(copies)) for p in copies.rglob("result.json")) == [
        "Dual-BERTs/dual_bert-seed1/result.json", "Dual-BERTs/dual_bert-seed2/result.json",
        "ENDX-BERTs/endx_bert-seed1/result.json"] and len(out["run_files"]) == 3
    copied = json.loads((copies / "Dual-BERTs" / "dual_bert-seed1" / "result.json").read_text())
    assert copied == _report("dual_bert", 1, 70.0, 400)  # the checkpoint paths left out
    again = side_by_side_table(load_reports([
        ("Dual-BERTs", str(copies / "Dual-BERTs" / "dual_bert-seed1")),
        ("Dual-BERTs", str(copies / "Dual-BERTs" / "dual_bert-seed2")),
        ("ENDX-BERTs", str(copies / "ENDX-BERTs" / "endx_bert-seed1"))]),
        output_dir=tmp_path / "again", tag="bert")
    assert again["rows"] == out["rows"]
    assert "`runs/side_by_side_bert/<method>/<experiment>-seed<seed>/`" in (
        tmp_path / "results" / "side_by_side_bert.md").read_text()
