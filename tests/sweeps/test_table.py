"""The comparison table of an `rqa sweep` folder (plain files; no model is run)."""

from __future__ import annotations

import json

import pytest

from retrieval_qa.analysis.common import pool_spreads, spread
from retrieval_qa.analysis.sweep_runs import load_sweep_runs
from retrieval_qa.cli import main
from retrieval_qa.errors import SettingsMismatchError
from retrieval_qa.sweeps.table import sweep_table


def _run(root, index, setting, seed, mrr=None, label=None):
    label = label or ",".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in setting.items())
    run_dir = root / label / "endx_gru" / f"cpu-seed{seed}"
    run_dir.mkdir(parents=True)
    (run_dir / "sweep.json").write_text(json.dumps({
        "sweep": "confounds", "metric": "test/mrr", "goal": "maximize", "index": index,
        "params": {**setting, "seed": seed}, "setting": setting, "label": label}))
    if mrr is not None:
        (run_dir / "result.json").write_text(json.dumps({
            "experiment": "endx_gru", "seed": seed, "monitor": "val/r@1",
            "best_val_score": mrr / 2, "train_seconds": 600 + seed,
            "test": {"dataset": "reqa_squad", "pool": "dev",
                     "metrics": {"mrr": mrr, "r@1": mrr - 10, "r@5": mrr + 10, "p@1": mrr - 10}}}))


@pytest.fixture
def sweep_dir(tmp_path):
    root = tmp_path / "confounds"
    a = {"model.gam.detach_cross": True, "model.gam.final": {"qq": 1.0, "aa": 1.0}}
    b = {"model.gam.detach_cross": False, "model.gam.final": {"qq": 1.0, "aa": 1.0}}
    for i, (seed, mrr) in enumerate([(1, 20.0), (2, 24.0), (3, 22.0)]):
        _run(root, i + 1, a, seed, mrr)
    _run(root, 4, b, 1, 30.0)
    _run(root, 5, b, 2)  # started (sweep.json written) but not finished
    return root


def test_one_row_per_setting_mean_and_sample_std_over_seeds(sweep_dir, tmp_path):
    out = sweep_table(sweep_dir, output_dir=tmp_path / "tables")
    data = json.loads((tmp_path / "tables" / "sweep_table.json").read_text())
    first, second = data["rows"]
    assert first["seeds"] == [1, 2, 3] and first["mrr"]["mean"] == 22.0
    assert first["mrr"]["std"] == 2.0 and first["runs"] == 3 and first["started"] == 3
    assert second["runs"] == 1 and second["started"] == 2 and second["mrr"]["std"] == 0.0
    assert data["swept"] == ["model.gam.detach_cross", "model.gam.final"]
    assert out["best"] == second["label"] and data["best"] == second["label"]
    md = (tmp_path / "tables" / "sweep_table.md").read_text()
    assert "| model.gam.detach_cross | model.gam.final | MRR | R@1 | R@5 | best val |" in md
    assert "| True | qq=1, aa=1 | 22.00 ± 2.00 | 12.00 ± 2.00 | 32.00 ± 2.00 | 11.00 ± 1.00 |" in md
    assert "| 1/2 best | 1 |" in md and "Test pool: reqa_squad/dev" in md


def test_side_by_side_sweep_command_writes_into_the_sweep_folder(sweep_dir, capsys):
    assert main(["analyze", "side-by-side", "--sweep", str(sweep_dir), "--metrics", "p@1,mrr"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["sweep"] == "confounds" and result["metric"] == "test/mrr"
    assert set(next(iter(result["rows"].values()))) == {"p@1", "mrr"}
    md = (sweep_dir / "sweep_table.md").read_text()
    assert "| P@1 | MRR |" in md and "test/mrr |" not in md  # the sweep's metric is a column


def test_a_row_never_averages_runs_of_other_settings(sweep_dir, tmp_path):
    """Runs of one setting (its seeds) trained with other settings besides the seed (the
    sweep file changed between calls into one folder) are named, not averaged."""
    runs = sorted((sweep_dir).glob("detach_cross=True*/endx_gru/cpu-seed*"))
    config = "seed: {seed}\ndata:\n  sampler_seed: ${{seed}}\n  batch_size: {batch}\n" \
             "output_dir: runs/{seed}\n"
    for run, batch in zip(runs, (32, 32, 16), strict=True):
        run.joinpath("config.yaml").write_text(config.format(seed=run.name[-1], batch=batch))
    with pytest.raises(SettingsMismatchError, match="data.batch_size: 32 -> 16") as e:
        sweep_table(sweep_dir, output_dir=tmp_path / "tables")
    assert str(runs[2]) in str(e.value) and not (tmp_path / "tables").exists()
    runs[2].joinpath("config.yaml").write_text(config.format(seed=3, batch=32))
    assert sweep_table(sweep_dir, output_dir=tmp_path / "tables")["rows"]


def test_side_by_side_needs_reports_or_a_sweep(tmp_path, capsys):
    assert main(["analyze", "side-by-side"]) == 2
    assert "--report NAME=RUN (repeated) or --sweep DIR" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="rqa sweep"):
        load_sweep_runs(tmp_path / "nothing")


@pytest.mark.parametrize("xs,ys", [([1.0], [3.0]), ([20.0, 24.0, 22.0], [30.0]),
                                   ([0.5, 0.39], [12.1, 7.3, 9.9])])
def test_pool_spreads_is_the_spread_of_the_pooled_values(xs, ys):
    pooled = pool_spreads(spread(xs), spread(ys))
    assert pooled == pytest.approx(spread(xs + ys), abs=1e-3)
    assert pool_spreads(None, spread(ys)) == spread(ys) and pool_spreads(spread(xs), None) == spread(xs)


def test_merge_pools_a_folder_into_an_earlier_table_of_the_sweep(sweep_dir, tmp_path):
    """An earlier table (its run folders gone) plus a folder of new seeds and a new setting
    gives the table of all the runs."""
    a = {"model.gam.detach_cross": True, "model.gam.final": {"qq": 1.0, "aa": 1.0}}
    c = {"model.gam.detach_cross": True, "model.gam.final": {"qq": 10.0, "aa": 10.0}}
    later = tmp_path / "later" / "confounds"
    _run(later, 6, a, 4, 26.0)
    _run(later, 7, c, 1, 5.0)
    sweep_table(sweep_dir, output_dir=tmp_path)
    everything = tmp_path / "all" / "confounds"  # the same runs in one folder
    for i, (seed, mrr) in enumerate([(1, 20.0), (2, 24.0), (3, 22.0), (4, 26.0)]):
        _run(everything, i + 1, a, seed, mrr)
    direct = sweep_table(everything, output_dir=tmp_path / "direct")
    direct_row = json.loads((tmp_path / "direct" / "sweep_table.json").read_text())["rows"][0]
    out = sweep_table(later, output_dir=tmp_path / "merged", merge=tmp_path / "sweep_table.json")
    data = json.loads((tmp_path / "merged" / "sweep_table.json").read_text())
    first, second, new = data["rows"]
    assert first["seeds"] == [1, 2, 3, 4] and first["runs"] == first["started"] == 4
    for key in ("mrr", "r@1", "best_val", "train_seconds", "sweep_metric"):
        assert first[key] == pytest.approx(direct_row[key], abs=1e-3)
    assert second["runs"] == second["started"] == 1  # the unfinished run's folder is gone
    assert new["setting"] == c and new["mrr"]["mean"] == 5.0
    assert data["merged"] == [str(tmp_path / "sweep_table.json")]
    assert out["best"] == second["label"] and direct["best"] == direct_row["label"]
    md = (tmp_path / "merged" / "sweep_table.md").read_text()
    assert "and the table" in md and "(`rqa sweep`, 6 runs started, 6 finished)" in md
    assert "| True | qq=1, aa=1 | 23.00 ± 2.58 |" in md


def test_merge_refuses_a_seed_twice_another_sweep_and_missing_columns(sweep_dir, tmp_path):
    table = tmp_path / "sweep_table.json"
    sweep_table(sweep_dir, output_dir=tmp_path)
    with pytest.raises(ValueError, match=r"seed\(s\) \[1, 2, 3\] both in the table"):
        sweep_table(sweep_dir, output_dir=tmp_path / "again", merge=table)
    later = tmp_path / "later" / "confounds"
    _run(later, 6, json.loads(table.read_text())["rows"][0]["setting"], 4, 26.0)
    with pytest.raises(ValueError, match="has no last train/gam_loss to pool"):
        sweep_table(later, output_dir=tmp_path / "again", merge=table, logged=["train/gam_loss"])
    other = tmp_path / "other" / "confounds"  # only a new setting: the earlier rows are kept
    _run(other, 7, {"model.gam.detach_cross": True, "model.gam.final": {"qq": 10.0, "aa": 10.0}},
         1, 5.0)
    sweep_table(other, output_dir=tmp_path / "kept", merge=table, logged=["train/gam_loss"])
    md = (tmp_path / "kept" / "sweep_table.md").read_text()
    assert "| True | qq=1, aa=1 | 22.00 ± 2.00 | 12.00 ± 2.00 | 32.00 ± 2.00 | 11.00 ± 1.00 | – |" in md
    earlier = json.loads(table.read_text())
    table.write_text(json.dumps({**earlier, "sweep": "ramp"}))
    with pytest.raises(ValueError, match="a table of sweep 'ramp', not of 'confounds'"):
        sweep_table(sweep_dir, output_dir=tmp_path / "again", merge=table)
    with pytest.raises(FileNotFoundError, match="no such file"):
        sweep_table(sweep_dir, merge=tmp_path / "none.json")
    assert main(["analyze", "side-by-side", "--report", f"a={tmp_path}", "--merge", str(table)]) == 2


def test_a_table_written_elsewhere_gets_each_runs_small_files(sweep_dir, tmp_path):
    """Beside a table written outside the sweep folder: per finished run its sweep.json and
    result.json without checkpoint paths (with the last logged values used), from which the
    same table is recomputed; nothing is copied into the sweep folder itself."""
    run = next(p for p in sweep_dir.rglob("cpu-seed1") if "detach_cross=True" in str(p))
    report = json.loads((run / "result.json").read_text())
    (run / "result.json").write_text(json.dumps({
        **report, "checkpoint": str(run / "model"), "resumed_from": None,
        "best_training_checkpoint": str(run / "checkpoints" / "best.ckpt")}))
    log = run / "logs" / "version_0"
    log.mkdir(parents=True)
    (log / "metrics.csv").write_text("step,train/gam_loss\n1,2.5\n2,1.25\n")
    tables = tmp_path / "results"
    out = sweep_table(sweep_dir, output_dir=tables, logged=["train/gam_loss"])
    copies = sorted((tables / "runs" / "confounds").rglob("result.json"))
    assert len(copies) == len(out["run_files"]) == 4  # the unfinished run has no result
    copied = json.loads((tables / "runs" / "confounds" / run.relative_to(sweep_dir)
                         / "result.json").read_text())
    assert copied["test"] == report["test"] and copied["seed"] == 1
    assert not {"checkpoint", "best_training_checkpoint", "resumed_from"} & set(copied)
    assert copied["last_logged"] == {"train/gam_loss": 1.25}
    table = json.loads((tables / "sweep_table.json").read_text())
    assert table["run_files"] == "runs/confounds"
    assert "`rqa analyze side-by-side --sweep runs/confounds`" in (
        tables / "sweep_table.md").read_text()
    again = tmp_path / "again"
    sweep_table(tables / "runs" / "confounds", output_dir=again, logged=["train/gam_loss"])
    recomputed = json.loads((again / "sweep_table.json").read_text())["rows"]
    for old, new in zip(table["rows"], recomputed, strict=True):
        for key in ("mrr", "r@1", "r@5", "best_val", "train_seconds", "seeds", "last_logged"):
            assert new[key] == old[key], key
    sweep_table(sweep_dir)  # the table in the sweep folder: the runs are there, no copies
    assert not (sweep_dir / "runs").exists()


def test_baseline_column_tests_rows_with_per_question_records(sweep_dir, tmp_path):
    import numpy as np

    from retrieval_qa.data.types import Candidate, RetrievalPool
    from retrieval_qa.evaluation.per_question import write_per_question

    n = 200
    pool = RetrievalPool("toy", "dev", [Candidate(f"c{i}", "a b", f"d{i}", "x")
                                        for i in range(n)],
                         [f"q{i}" for i in range(n)], [[i] for i in range(n)])
    rng = np.random.default_rng(0)
    better = {"model.gam.detach_cross": False, "model.gam.final": {"qq": 1.0, "aa": 1.0}}
    _run(sweep_dir, 6, {**better, "model.gam.final": {"qq": 2.0, "aa": 1.0}}, 1, 25.0,
         label="no-records")
    for run in sorted(sweep_dir.rglob("result.json")):
        if "no-records" in str(run):
            continue
        ranks = rng.integers(1, 10, n).astype(float)
        if "detach_cross=False" in str(run):
            ranks[: n // 2] = 1.0  # the better setting
        write_per_question(run.parent / "per_question.jsonl.gz", pool, ranks, None,
                           (1, 5, 10))
    base = "detach_cross=True,final={'qq': 1.0, 'aa': 1.0}"
    labels = [r["sweep"]["label"] for r in load_sweep_runs(sweep_dir)]
    assert base in labels
    sweep_table(sweep_dir, output_dir=tmp_path / "t", baseline=base)
    md = (tmp_path / "t" / "sweep_table.md").read_text()
    data = json.loads((tmp_path / "t" / "sweep_table.json").read_text())
    assert f"| vs {base} |" in md and "| baseline |" in md
    assert "| no per-question records |" in md
    tested = next(r for r in data["rows"] if "vs_baseline" in r)
    assert tested["vs_baseline"]["diff"] > 0 and tested["vs_baseline"]["significant"]
    assert data["baseline"] == {"label": base, "metric": "mrr", "tested": 1, "questions": n}
    copied = list((tmp_path / "t" / "runs").rglob("per_question.jsonl.gz"))
    assert len(copied) == 4  # the records travel with the result copies
    with pytest.raises(ValueError, match="no such row"):
        sweep_table(sweep_dir, output_dir=tmp_path / "t2", baseline="nope")


@pytest.mark.parametrize("content", [b"", b'{"sweep": "x", "rows": [', b"\x00\xff" * 8])
def test_a_damaged_table_to_merge_into_is_refused_naming_it(sweep_dir, tmp_path, content):
    from retrieval_qa.errors import InputFileError

    table = tmp_path / "sweep_table.json"
    table.write_bytes(content)
    with pytest.raises(InputFileError, match=f"--merge {table}: damaged: .* write it again"):
        sweep_table(sweep_dir, output_dir=tmp_path / "merged", merge=table)
    assert not (tmp_path / "merged").exists()
