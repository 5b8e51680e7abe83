"""bench/bench_train_steps.py: the step rate of a real `rqa train` run, read between two marks."""

from __future__ import annotations

from helpers import TINY_SQUAD, make_dirs, tiny_overrides

from bench import bench_train_steps as bench
from retrieval_qa.cli import main
from retrieval_qa.training.callbacks import ResumableCheckpoints


def test_prints_the_rate_between_the_marks(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "START", 2)
    monkeypatch.setattr(ResumableCheckpoints, "on_train_batch_end",
                        ResumableCheckpoints.on_train_batch_end)  # undone after the test
    marks = bench.install()
    dirs = make_dirs(tmp_path / "data", TINY_SQUAD)
    assert main(["train", *tiny_overrides(dirs, tmp_path / "runs", "test_after_fit=false",
                                          "trainer.max_steps=5")]) == 0
    assert sorted(marks) == [2, 5] and marks[5] > marks[2]
    line = [x for x in capsys.readouterr().err.splitlines() if x.startswith("STEPRATE")]
    assert len(line) == 1 and float(line[0].split()[1]) > 0
    assert "steps 2-5" in line[0]
