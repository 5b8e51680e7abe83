"""Table 5: the override sets of the ablation runs and the table from finished reports."""

from __future__ import annotations

import json

import pytest

from retrieval_qa.analysis.ablation import ablation_runs, ablation_table, ablation_variants
from retrieval_qa.training.compose import compose


def test_variants_remove_one_gam_term_each():
    variants = ablation_variants()
    assert [v["overrides"] for v in variants] == [
        ["model.gam.final.qq=0"], ["model.gam.final.aa=0"], ["model.gam.final.qa=0"],
        ["model.gam.final.aq=0"]]
    assert [v["name"] for v in variants] == ["w/o L_q|q", "w/o L_a|a", "w/o L_q|a",
                                             "w/o L_a|q"]
    full = compose(["experiment=endx_gru", "profile=cpu"]).model.gam.final
    for v in variants:
        final = compose(["experiment=endx_gru", "profile=cpu", *v["overrides"]]).model.gam.final
        assert final[v["term"]] == 0
        assert {k: final[k] for k in final if k != v["term"]} == {
            k: full[k] for k in full if k != v["term"]}
    with pytest.raises(ValueError, match="unknown GAM term"):
        ablation_variants(["xx"])


def test_runs_get_their_own_output_folders(tmp_path):
    runs = ablation_runs("endx_gru", "cpu", seeds=(1, 2), runs_dir=tmp_path)
    assert len(runs) == 8 and len({r["run_dir"] for r in runs}) == 8
    r = runs[0]
    assert r["train_overrides"] == ["experiment=endx_gru", "profile=cpu", "seed=1",
                                    f"output_dir={tmp_path / 'endx_gru_ablation' / 'wo_qq'}",
                                    "model.gam.final.qq=0"]
    assert r["run_dir"].endswith("endx_gru_ablation/wo_qq/endx_gru/cpu-seed1")
    cfg = compose(r["train_overrides"])  # a valid `rqa train` override list
    assert cfg.model.gam.final.qq == 0 and cfg.seed == 1


def _report(mrr, r1, r5, seed):
    return {"seed": seed, "experiment": "endx_gru",
            "test": {"dataset": "reqa_squad", "pool": "dev",
                     "metrics": {"mrr": mrr, "r@1": r1, "r@5": r5}}}


def test_table_from_reports_mean_and_spread(tmp_path):
    reports = {"Dual-GRUs": [_report(50, 40, 60, 1), _report(52, 42, 62, 2)],
               "ENDX-GRUs": [_report(54, 44, 64, 1), _report(56, 46, 66, 2)],
               "w/o L_q|q": _report(53, 43, 63, 1)}
    out = ablation_table(reports, output_dir=tmp_path)
    assert out["reference"] == "ENDX-GRUs"
    assert out["rows"]["ENDX-GRUs"] == {"mrr": 55.0, "r@1": 45.0, "r@5": 65.0}
    data = json.loads((tmp_path / "table5.json").read_text())
    endx = next(r for r in data["rows"] if r["name"] == "ENDX-GRUs")
    assert endx["mrr"]["std"] == pytest.approx(1.4142, abs=1e-4) and endx["runs"] == 2
    wo = next(r for r in data["rows"] if r["name"] == "w/o L_q|q")
    assert wo["delta_vs_reference"]["mrr"] == -2.0
    md = (tmp_path / "table5.md").read_text()
    assert "| ENDX-GRUs | 55.00 ± 1.41 |" in md and "| w/o L_q\\|q | 53.00 |" in md
    with pytest.raises(ValueError, match="without test.metrics"):
        ablation_table({"x": {"seed": 1, "test": {}}}, output_dir=tmp_path)


def test_ablation_command_on_real_reports(env, tmp_path, rqa):
    run = env.endx_run
    out = rqa("analyze", "ablation", "--report", f"Dual-GRUs={env.dual['checkpoint']}/../result.json",
              "--report", f"ENDX-GRUs={run}", "--report", f"w/o L_q|q={run / 'result.json'}",
              "--output-dir", tmp_path)
    assert set(out["rows"]) == {"Dual-GRUs", "ENDX-GRUs", "w/o L_q|q"}
    assert out["rows"]["w/o L_q|q"] == out["rows"]["ENDX-GRUs"]
    assert (tmp_path / "table5.md").read_text().count("\n| ") >= 4
