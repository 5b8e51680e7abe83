"""experiments/collect_pipeline_plus.py: one seed of the pipeline aimed past 86 committed (its
looks through `rqa ledger --keep`, the fused baselines, each look's JSON and the times)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments import collect_pipeline_plus as C
from retrieval_qa.data import Candidate, RetrievalPool
from retrieval_qa.errors import InputFileError
from retrieval_qa.evaluation import ledger
from retrieval_qa.evaluation.per_question import write_per_question

POOL = RetrievalPool("toy", "dev", [Candidate(f"c{i}", f"s{i}", "", f"d{i}") for i in range(4)],
                     questions=["q0", "q1", "q2"], gold=[[0], [1], [2]])


def _seed_run(seed: int, ranks, runs: str = "runs/pipeline_plus") -> None:
    """What make reproduce-pipeline-plus SEED=seed leaves in runs/ (in the working folder)."""
    for dataset, pool in C.POOLS:
        where = f"{runs}/seed{seed}/{dataset}-{pool}"
        for name in ("reranked", "fused"):
            write_per_question(f"{where}/{name}.run.questions.jsonl.gz", POOL,
                               np.asarray(ranks, dtype=np.float64), None, (1, 5))
        ledger.record(dataset=dataset, pool=pool, metrics={"mrr": 60.0 + seed}, questions=3,
                      kind="pipeline", name="hybrid_plus_reader", family=C.FAMILY, ranks=ranks,
                      record_file=f"{where}/reranked.run.questions.jsonl.gz",
                      path="runs/ledger.jsonl")
        with open(f"{where}.json", "w") as f:
            json.dump({"dataset": dataset, "seed": seed}, f)


def test_a_seed_is_collected_and_another_seed_left_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _seed_run(1, [1.0, 2.0, 1.0])
    _seed_run(2, [3.0, 1.0, 1.0])
    (tmp_path / "runs/pipeline_plus/times-seed2.tsv").write_text("t\treader\t5\t0\t2\n")
    out = C.collect(2, tmp_path / "runs/ledger.jsonl", tmp_path / "runs/pipeline_plus",
                    tmp_path / "results/distill_plus")
    assert [mrr for _, _, mrr in out["kept"]] == [62.0, 62.0]
    kept = ledger.read(tmp_path / "results/ledger.jsonl")
    assert {(e["seed"], e["config"]) for e in kept} == {(2, C.CONFIG)}
    results = tmp_path / "results/distill_plus"
    for dataset, pool in C.POOLS:
        assert (results / f"records/pipeline_plus_seed2.{dataset}_{pool}.questions.jsonl.gz"
                ).is_file()
        assert (results / f"records/fused_plus_seed2.{dataset}_{pool}.questions.jsonl.gz"
                ).is_file()
        assert json.loads((results / f"pipeline_plus_seed2.{dataset}_{pool}.json")
                          .read_text())["seed"] == 2
    assert (results / "times_pipeline_seed2.tsv").read_text() == C.HEADER + "t\treader\t5\t0\t2\n"
    with pytest.raises(InputFileError, match="no pipeline_plus look of seed 3"):
        C.collect(3, tmp_path / "runs/ledger.jsonl", tmp_path / "runs/pipeline_plus", results)


def test_attempt_2_is_collected_under_names_of_its_own(tmp_path, monkeypatch):
    """--plus distill_plus6: the runs of runs/pipeline_plus6, kept beside attempt 1's under
    pipeline_plus6_* names and a label of their own, attempt 1's files untouched."""
    monkeypatch.chdir(tmp_path)
    _seed_run(2, [3.0, 1.0, 1.0])
    _seed_run(2, [1.0, 1.0, 2.0], runs="runs/pipeline_plus6")
    (tmp_path / "runs/pipeline_plus6/times-seed2.tsv").write_text("t\tdev\t5\t0\t2\n")
    results = tmp_path / "results/distill_plus"
    assert C.main(["--seed", "2", "--plus", "distill_plus6", "--results", str(results)]) == 0
    kept = ledger.read(tmp_path / "results/ledger.jsonl")
    assert {e["config"] for e in kept} == {C.ATTEMPTS["distill_plus6"]["config"]}
    assert {e["record"].split("/")[-1].split(".")[0] for e in kept} == {"pipeline_plus6_seed2"}
    for dataset, pool in C.POOLS:
        assert (results / f"records/fused_plus6_seed2.{dataset}_{pool}.questions.jsonl.gz"
                ).is_file()
        assert (results / f"pipeline_plus6_seed2.{dataset}_{pool}.json").is_file()
    assert (results / "times_pipeline6_seed2.tsv").is_file()
    assert not list(results.glob("pipeline_plus_seed*"))
    with pytest.raises(InputFileError, match="PLUS=distill_plus6 SEED=1"):
        C.collect(1, tmp_path / "runs/ledger.jsonl", tmp_path / "runs/pipeline_plus6", results,
                  "distill_plus6")
