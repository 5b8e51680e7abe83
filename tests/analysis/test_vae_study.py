"""experiments/vae_study.py with a stand-in for `rqa`: the nine runs and their subset
evaluations, the mean and sample std per row, resuming (finished runs are not rerun), and
the refusal to reuse a finished run trained with other settings."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from helpers import load_experiment
from omegaconf import OmegaConf

from retrieval_qa.training.compose import compose

BASE_MRR = {"dual_gru": 20.0, "dual_vae": 10.0, "cross_vae": 12.0}


@pytest.fixture
def script(monkeypatch):
    module = load_experiment("vae_study", monkeypatch)

    def refuse(*a, **kw):
        raise AssertionError("the stand-in runner must be used")

    monkeypatch.setattr(module, "rqa_subprocess", refuse)
    return module


class FakeRqa:
    """`rqa train` writes result.json as the real one does; `rqa evaluate` answers."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, args: list[str]) -> dict:
        self.calls.append(list(args))
        if args[0] == "train":
            kv = dict(a.split("=", 1) for a in args[1:])
            exp, seed = kv["experiment"], int(kv["seed"])
            folder = Path(kv["output_dir"]) / exp / f"{kv['profile']}-seed{seed}"
            mrr = BASE_MRR[exp] + seed
            report = {"checkpoint": str(folder / "model"), "experiment": exp, "seed": seed,
                      "description": f"{exp} profile", "pretrained": "tiny",
                      "best_val_score": mrr - 1, "global_steps": int(kv["trainer.max_steps"]),
                      "trainer": {"max_steps": int(kv["trainer.max_steps"])},
                      "data": {"train": {"pairs": 20000}}, "seconds": 10.0 * seed,
                      "test": {"metrics": {"mrr": mrr, "r@1": mrr / 2, "r@5": mrr * 1.5},
                               "questions": 10539}}
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "config.yaml").write_text(OmegaConf.to_yaml(compose(args[1:])))
            (folder / "result.json").write_text(json.dumps(report))
            return report
        assert args[0] == "evaluate" and "--min-questions-per-answer" in args
        assert args[args.index("--min-questions-per-answer") + 1] == "9"
        assert args[args.index("--pool") + 1] == "dev" and args[-1] == "--quiet"
        checkpoint = Path(args[args.index("--checkpoint") + 1])
        exp, seed = checkpoint.parent.parent.name, int(checkpoint.parent.name[-1])
        mrr = BASE_MRR[exp] / 2 + seed
        return {"metrics": {"mrr": mrr, "r@1": mrr / 2, "r@5": mrr * 1.5}, "questions": 81,
                "sse": 0.1 * seed, "sse_pairs": 400, "sse_answers": 8, "seconds": 3.0}


def main(script, tmp_path, rqa, *extra):
    argv = ["--runs", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "res"),
            "--overrides", "trainer.max_steps=7", *extra]
    return script.main(argv, rqa=rqa)


def test_study_table_resume_and_settings_check(script, tmp_path, capsys):
    rqa = FakeRqa()
    assert main(script, tmp_path, rqa) == 0
    trains = [c for c in rqa.calls if c[0] == "train"]
    assert len(trains) == 9 and len(rqa.calls) == 18
    assert trains[0] == ["train", "experiment=dual_gru", "profile=cpu", "seed=1",
                         f"output_dir={tmp_path / 'runs'}", "threads=1", "test_after_fit=true",
                         "trainer.max_steps=7"]
    assert (tmp_path / "runs" / "cross_vae" / "cpu-seed3" / "subset.json").is_file()

    table = json.loads((tmp_path / "res" / "table.json").read_text())
    rows = {r["name"]: r for r in table["rows"]}
    assert list(rows) == ["Dual-GRUs", "Dual-VAEs", "Cross-VAEs"]
    cross = rows["Cross-VAEs"]
    assert cross["seeds"] == [1, 2, 3] and cross["steps"] == [7]
    assert cross["test"]["mrr"]["mean"] == pytest.approx(14.0)
    assert cross["test"]["mrr"]["std"] == pytest.approx(statistics.stdev([13, 14, 15]))
    assert cross["subset"]["sse"]["mean"] == pytest.approx(0.2)
    assert cross["paper"]["table3"]["sse"] == 0.09 and rows["Dual-VAEs"]["paper"]["table3"] is None
    assert table["comparison"]["cross_minus_dual_vae_mrr"]["mean"] == pytest.approx(2.0)
    assert table["comparison"]["cross_minus_dual_vae_mrr"]["std"] == pytest.approx(0.0)
    md = (tmp_path / "res" / "table.md").read_text()
    assert "| Cross-VAEs | 14.00 ± 1.00 |" in md
    assert "62.29 / 55.60 / 70.05" in md and "48.52 / 44.55 / 53.52 / 0.09" in md
    assert "trainer.max_steps=7" in md and "cross_vae profile" in md
    capsys.readouterr()

    again = FakeRqa()  # resumed: everything finished, nothing runs, the same table
    assert main(script, tmp_path, again) == 0
    assert again.calls == []
    table2 = json.loads((tmp_path / "res" / "table.json").read_text())
    assert table2["rows"] == table["rows"]
    assert {c["status"] for c in table2["commands"]} == {"finished earlier"}

    other = FakeRqa()  # a finished run of other settings is never reused silently
    with pytest.raises(SystemExit, match="trainer.max_steps: 7 -> 9"):
        script.main(["--runs", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "r2"),
                     "--overrides", "trainer.max_steps=9"], rqa=other)
    assert other.calls == []


def test_dry_run_runs_nothing(script, tmp_path, capsys):
    rqa = FakeRqa()
    assert main(script, tmp_path, rqa, "--dry-run", "--seeds", "1") == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert rqa.calls == [] and len(lines) == 3
    assert "experiment=cross_vae" in lines[2] and "to run" in lines[2]


def test_stats_sample_std(script):
    assert script.stats([1.0, 2.0, 3.0]) == {"mean": 2.0, "std": 1.0, "min": 1.0, "max": 3.0,
                                             "n": 3}
    assert script.stats([5.0])["std"] == 0.0 and script.stats([])["n"] == 0
