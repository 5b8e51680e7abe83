"""experiments/sde_ade_study.py with a stand-in for `rqa`: the MultiReQA evaluation of every
finished sweep run (kept, not repeated), the table against the paper with the gain over ADE,
and the t-SNE call on each variant's lowest seed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import load_experiment

MRR = {"sde": 40.0, "ade": 30.0, "ade_spl": 39.0}


def metrics(dataset: str, exp: str, seed: int) -> dict:
    if dataset == "multireqa_squad":
        return {"p@1": MRR[exp] - 10 + seed, "mrr": MRR[exp] + 2 * seed}
    return {"mrr": MRR[exp] + seed, "r@1": 20.0, "r@5": 50.0}


@pytest.fixture
def study(monkeypatch):
    return load_experiment("sde_ade_study", monkeypatch)


def fake_sweep(root: Path) -> Path:
    """Finished runs of sde, ade and ade_spl (seeds 2 and 1), one unfinished ade_ste run; the
    sde runs were tested on ReQA SQuAD dev, the others on MultiReQA SQuAD test."""
    index = 0
    for exp, seeds in (("sde", (2, 1)), ("ade", (1, 2)), ("ade_ste", (1,)), ("ade_spl", (1, 2))):
        for seed in seeds:
            index += 1
            run = root / f"experiment={exp}" / exp / f"cpu-seed{seed}"
            run.mkdir(parents=True)
            (run / "sweep.json").write_text(json.dumps(
                {"sweep": "sde_ade", "index": index, "setting": {"experiment": exp},
                 "label": f"experiment={exp}", "params": {"experiment": exp, "seed": seed}}))
            if exp == "ade_ste":
                continue
            dataset, split = ("reqa_squad", "dev") if exp == "sde" else ("multireqa_squad", "test")
            (run / "result.json").write_text(json.dumps(
                {"experiment": exp, "seed": seed, "description": f"{exp}, CPU profile (REDUCED)",
                 "train_seconds": 100.0, "checkpoint": str(run / "model"),
                 "test": {"dataset": dataset, "pool": split,
                          "metrics": metrics(dataset, exp, seed)}}))
    return root


class FakeRqa:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, args, cwd=None) -> dict:
        args = [str(a) for a in args]
        self.calls.append(args)
        if args[0] == "evaluate":
            dataset, split = args[args.index("--dataset") + 1], args[args.index("--pool") + 1]
            assert (dataset, split) in {("multireqa_squad", "test"), ("reqa_squad", "dev")}
            run = Path(args[args.index("--checkpoint") + 1]).parent
            exp, seed = run.parent.name, int(run.name[-1])
            return {"metrics": metrics(dataset, exp, seed)}
        if args[0] == "analyze":
            return {"analysis": "towers"}
        raise AssertionError(f"unexpected rqa {args}")


@pytest.fixture(autouse=True)
def _no_budget_runs(monkeypatch, tmp_path):
    """The script's default --budget-runs is relative to the working directory: keep the
    checkout's own runs out of these tests."""
    monkeypatch.chdir(tmp_path)


def test_table_from_a_partial_sweep(study, tmp_path):
    sweep = fake_sweep(tmp_path / "sde_ade")
    rqa = FakeRqa()
    out = tmp_path / "results"
    assert study.main(["--no-train", "--sweep-dir", str(sweep), "--results-dir", str(out)],
                      rqa=rqa) == 0
    evaluated = [(Path(c[c.index("--checkpoint") + 1]).parent.parent.name,
                  c[c.index("--dataset") + 1]) for c in rqa.calls if c[0] == "evaluate"]
    assert sorted(evaluated) == sorted([("sde", "multireqa_squad")] * 2
                                       + [("ade", "reqa_squad")] * 2
                                       + [("ade_spl", "reqa_squad")] * 2)
    table = json.loads((out / "table2.json").read_text())
    rows = {r["name"]: r for r in table["rows"]}
    assert rows["SDE"]["multireqa_seeds"] == rows["SDE"]["reqa_seeds"] == [1, 2]
    assert rows["SDE"]["mrr"]["mean"] == 43.0       # 40 + 2 * 1.5
    assert rows["SDE"]["p@1"]["mean"] == 31.5
    assert rows["ADE"]["reqa"]["mrr"]["mean"] == 31.5
    assert rows["ADE-SPL"]["mrr_gain_over_ade_pct"]["ours"] == pytest.approx(
        100 * (42 - 33) / 33, abs=0.01)
    assert rows["ADE"]["mrr_gain_over_ade_pct"]["paper"] == 0.0
    assert rows["SDE"]["mrr_gain_over_ade_pct"]["paper"] == pytest.approx(11.53, abs=0.01)
    assert rows["ADE-STE"]["multireqa_seeds"] == [] and rows["ADE-STE"]["mrr"] is None
    assert rows["BERT-DE"]["experiment"] is None
    md = (out / "table2.md").read_text()
    assert "| SDE | 31.50 ± 0.71 | 43.00 ± 1.41 |" in md and "70.13" in md
    # the overview notebook reads the paper's pool beside conf/tables/sde_ade_table2.yaml
    from retrieval_qa.analysis.overview import collect_results

    entries = [e for e in collect_results(out) if e["method"] == "SDE" and e["metric"] == "mrr"]
    assert [(e["table"], e["ours"], e["paper"]) for e in entries] == [
        ("sde_ade_table2", 43.0, 78.44)]
    towers = next(c for c in rqa.calls if c[0] == "analyze")
    models = [towers[i + 1] for i, a in enumerate(towers) if a == "--model"]
    assert [m.split("=")[0] for m in models] == ["SDE", "ADE", "ADE-SPL"]
    assert all(m.endswith("cpu-seed1/model") for m in models)
    # a rerun keeps the evaluations
    rqa2 = FakeRqa()
    study.main(["--no-train", "--sweep-dir", str(sweep), "--results-dir", str(out)], rqa=rqa2)
    assert not any(c[0] == "evaluate" for c in rqa2.calls)


def test_pools_option_skips_reqa(study, tmp_path):
    sweep = fake_sweep(tmp_path / "sde_ade")
    rqa = FakeRqa()
    study.main(["--no-train", "--pools", "multireqa", "--sweep-dir", str(sweep),
                "--results-dir", str(tmp_path / "r")], rqa=rqa)
    assert {c[c.index("--dataset") + 1] for c in rqa.calls if c[0] == "evaluate"} == {
        "multireqa_squad"}
    rows = {r["name"]: r for r in json.loads((tmp_path / "r" / "table2.json").read_text())["rows"]}
    assert rows["ADE"]["reqa_seeds"] == [] and rows["ADE"]["multireqa_seeds"] == [1, 2]
    with pytest.raises(SystemExit):  # refused before the sweep would run
        study.main(["--pools", "msmarco", "--sweep-dir", str(sweep)], rqa=rqa)
    assert not any(c[0] == "sweep" for c in rqa.calls)


def test_without_no_train_the_sweep_runs_first(study, tmp_path):
    sweep = fake_sweep(tmp_path / "sde_ade")
    rqa = FakeRqa()
    calls = []

    def runner(args, cwd=None):
        if args[0] == "sweep":
            calls.append([str(a) for a in args])
            return {}
        return rqa(args, cwd)

    study.main(["--sweep-dir", str(sweep), "--results-dir", str(tmp_path / "r")], rqa=runner)
    assert calls == [["sweep", "sde_ade", "--output-dir", str(tmp_path)]]


def test_budget_curves_beside_the_sweep_run(study, tmp_path):
    sweep = fake_sweep(tmp_path / "sde_ade")
    report = json.loads((sweep / "experiment=ade/ade/cpu-seed1/result.json").read_text())
    report.update(global_steps=125, last_val={"val/mrr": 30.5, "val/r@1": 20.0})
    (sweep / "experiment=ade/ade/cpu-seed1/result.json").write_text(json.dumps(report))
    run = tmp_path / "budget" / "ade" / "cpu-seed1"
    (run / "logs" / "version_0").mkdir(parents=True)
    (run / "result.json").write_text(json.dumps({"experiment": "ade", "seed": 1,
                                                 "global_steps": 500}))
    (run / "logs" / "version_0" / "metrics.csv").write_text(
        "epoch,step,train/loss,val/mrr,val/r@1\n0,9,3.9,,\n0,124,,33.333,21.0\n"
        "0,249,,41.0,30.0\n")
    out = tmp_path / "r"
    study.main(["--no-train", "--pools", "multireqa", "--sweep-dir", str(sweep),
                "--results-dir", str(out), "--budget-runs", str(tmp_path / "budget")],
               rqa=FakeRqa())
    row = json.loads((out / "budget.json").read_text())["rows"][0]
    assert [c["val/mrr"] for c in row["curve"]] == [33.33, 41.0]
    assert row["sweep_run_at_end"] == {"steps": 125, "val/mrr": 30.5, "val/r@1": 20.0}
    assert "| ade | 1 |" in (out / "budget.md").read_text()


def test_each_runs_files_are_kept_beside_the_table(study, tmp_path):
    """results/.../runs/sde_ade/<run>/: result.json without the checkpoint path, sweep.json and
    the evaluation on the other pool; the table is recomputed from those files alone."""
    sweep = fake_sweep(tmp_path / "sde_ade")
    out = tmp_path / "results"
    assert study.main(["--no-train", "--sweep-dir", str(sweep), "--results-dir", str(out)],
                      rqa=FakeRqa()) == 0
    copies = out / "runs" / "sde_ade"
    run = copies / "experiment=sde" / "sde" / "cpu-seed1"
    assert {p.name for p in run.iterdir()} == {"result.json", "sweep.json",
                                               "multireqa_squad_test.json"}
    assert "checkpoint" not in json.loads((run / "result.json").read_text())
    assert len(list(copies.rglob("result.json"))) == 6  # the unfinished ade_ste run: none
    table = json.loads((out / "table2.json").read_text())
    assert table["run_files"] == "runs/sde_ade"
    rqa = FakeRqa()
    again = tmp_path / "again"
    assert study.main(["--no-train", "--sweep-dir", str(copies), "--results-dir", str(again)],
                      rqa=rqa) == 0
    assert not any(c[0] == "evaluate" for c in rqa.calls)  # the evaluations came along
    rows = json.loads((again / "table2.json").read_text())["rows"]
    for old, new in zip(table["rows"], rows, strict=True):
        for key in ("p@1", "mrr", "reqa", "multireqa_seeds", "reqa_seeds", "train_seconds"):
            assert new[key] == old[key], (old["name"], key)
