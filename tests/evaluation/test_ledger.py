"""The ledger of test-pool looks: which pools are test pools, what a configuration is, the
lines written by `rqa evaluate`, and the summary `rqa ledger` prints."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from retrieval_qa.cli.main import main
from retrieval_qa.errors import InputFileError
from retrieval_qa.evaluation import ledger, ledger_keep


@pytest.mark.parametrize("dataset, pool, test", [
    ("reqa_squad", "dev", True), ("reqa_squad", "train", True),
    ("reqa_squad", "train-val", False), ("reqa_squad", "train-val-1000q", False),
    ("multireqa_squad", "test", True), ("multireqa_squad", "train", False),
    ("multireqa_relationextraction", "test", True), ("squad_paragraphs", "dev", True),
    ("reqa_squad", "dev[qpa>=9]", True)])
def test_test_pools(dataset, pool, test):
    assert ledger.is_test_pool(dataset, pool) is test


def test_configuration_leaves_out_seed_and_paths():
    a = ledger.configuration_digest({"model": {"lr": 1e-4}, "seed": 1, "output_dir": "a"})
    assert a == ledger.configuration_digest({"model": {"lr": 1e-4}, "seed": 2,
                                             "output_dir": "b"})
    assert a != ledger.configuration_digest({"model": {"lr": 2e-4}, "seed": 1})


def test_record_logs_test_pools_only(tmp_path):
    path = tmp_path / "ledger.jsonl"
    common = dict(metrics={"mrr": 50.0, "r@1": 40.0, "loss": 1.0}, questions=3,
                  kind="evaluate", name="bm25", path=path)
    assert ledger.record(dataset="reqa_squad", pool="train-val", **common) is None
    assert not path.exists()
    line = ledger.record(dataset="reqa_squad", pool="dev", ranks=[1.0, 2.5, 4.0],
                         overrides=["k1=0.9", "output_dir=x"], seed=3, **common)
    back = ledger.read(path)
    assert back == [line]
    assert line["metrics"] == {"mrr": 50.0, "r@1": 40.0}
    assert line["family"] == "bm25" and line["seed"] == 3
    assert line["ranks"] == ledger.ranks_digest([1.0, 2.5, 4.0])
    # another seed and another output folder: the same configuration
    again = ledger.record(dataset="reqa_squad", pool="dev", overrides=["k1=0.9",
                          "output_dir=y"], seed=4, **common)
    assert again["configuration"] == line["configuration"]
    other = ledger.record(dataset="reqa_squad", pool="dev", overrides=["k1=1.2"], **common)
    assert other["configuration"] != line["configuration"]
    (row,) = ledger.summarise(ledger.read(path))
    assert (row["configurations"], row["evaluations"], row["seeds"]) == (2, 3, [3, 4])


def test_family_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(ledger.FAMILY_ENV, "my-study")
    line = ledger.record(dataset="reqa_squad", pool="dev", metrics={"mrr": 1.0}, questions=1,
                         kind="evaluate", name="bm25", path=tmp_path / "l.jsonl")
    assert line["family"] == "my-study"


def test_damaged_ledger_names_the_line(tmp_path):
    path = tmp_path / "ledger.jsonl"
    path.write_text('{"format": "rqa-ledger/1"}\n')
    with pytest.raises(InputFileError, match="line 1 is not a rqa-ledger/1 entry"):
        ledger.read(path)
    path.write_text("not json\n")
    with pytest.raises(InputFileError, match="line 1 is not JSON"):
        ledger.read(path)


def test_rqa_evaluate_appends_its_look(tiny_squad_file, tmp_path, monkeypatch):
    path = tmp_path / "looks.jsonl"
    monkeypatch.setenv(ledger.ENV, str(path))
    data = tiny_squad_file.parents[1]
    run = tmp_path / "bm25.jsonl"
    out = io.StringIO()
    assert main(["evaluate", "--model", "bm25", "--dataset", "reqa_squad", "--pool", "dev",
                 "--data-dir", str(data), "--run-file", str(run), "--quiet",
                 "--family", "baselines"], stdout=out) == 0
    result = json.loads(out.getvalue().strip().splitlines()[-1])
    (line,) = ledger.read(path)
    assert line["family"] == "baselines" and line["kind"] == "evaluate"
    assert line["metrics"]["mrr"] == pytest.approx(result["metrics"]["mrr"], abs=1e-4)
    from retrieval_qa.evaluation.per_question import beside_run_file, read_per_question

    assert line["ranks"] == ledger.ranks_digest(read_per_question(beside_run_file(run)).ranks)
    out = io.StringIO()
    assert main(["ledger", "--ledger", str(path), "--results", str(tmp_path / "none")],
                stdout=out) == 0
    rows = json.loads(out.getvalue().strip().splitlines()[-1])["rows"]
    assert [(r["family"], r["pool"], r["configurations"]) for r in rows] == [
        ("baselines", "reqa_squad/dev", 1)]


def test_the_validation_side_chooses_off_the_ledger(tmp_path, monkeypatch):
    from helpers import TINY_SQUAD, make_dirs

    from retrieval_qa.data import load_pool
    from retrieval_qa.data.split import train_val_split

    path = tmp_path / "looks.jsonl"
    monkeypatch.setenv(ledger.ENV, str(path))
    data = make_dirs(tmp_path, TINY_SQUAD)[0] / "data"
    out = io.StringIO()
    assert main(["evaluate", "--model", "bm25", "--dataset", "reqa_squad", "--pool",
                 "validation", "--data-dir", str(data), "--quiet"], stdout=out) == 0
    result = json.loads(out.getvalue().strip().splitlines()[-1])
    _, val = train_val_split(load_pool("reqa_squad", "train", data)[0], 0.1, 0)
    assert (result["pool"], result["questions"], result["candidates"]) == (
        "train-val", len(val.questions), len(val.candidates))
    assert not path.exists()  # a validation pool is not a look at a test pool


def test_a_checkpoint_look_is_named_by_the_training_that_made_it(tmp_path, monkeypatch):
    """Two trainings of one architecture are two configurations; two seeds of one training
    (other folders) are one."""
    from argparse import Namespace

    from retrieval_qa.cli.evaluate import log_look

    monkeypatch.setenv(ledger.ENV, str(tmp_path / "looks.jsonl"))
    result = {"dataset": "reqa_squad", "pool": "dev", "metrics": {"mrr": 50.0}, "questions": 3,
              "settings": {"experiment": "distill", "towers": {"pooler": "mean"}}}

    def look(run, config):
        (tmp_path / run / "model").mkdir(parents=True)
        (tmp_path / run / "config.yaml").write_text(config)
        args = Namespace(checkpoint=str(tmp_path / run / "model"), pipeline=None, model=None,
                         overrides=[], family="f", max_questions=None,
                         min_questions_per_answer=0)
        line = log_look(args, result, keep_record=False)
        return line["configuration"], line["seed"]

    a = look("a", "seed: 42\noutput_dir: a\ndata: {questions: 4800, output: t/a}\n")
    b = look("b", "seed: 1\noutput_dir: b\ndata: {questions: 4800, output: t/b}\n")
    c = look("c", "seed: 42\noutput_dir: c\ndata: {questions: 14400, output: t/c}\n")
    assert a[0] == b[0] != c[0] and (a[1], b[1]) == (42, 1)


def _look(tmp_path, ranks, seed=None, name="hybrid"):
    """One look on a ledger in tmp_path/runs, with its per-question record."""
    import numpy as np

    from retrieval_qa.data import Candidate, RetrievalPool
    from retrieval_qa.evaluation.per_question import write_per_question

    pool = RetrievalPool("toy", "dev", [Candidate(f"c{i}", f"s{i}", "", f"d{i}")
                                        for i in range(4)],
                         questions=["q0", "q1", "q2"], gold=[[0], [1], [2]])
    record = write_per_question(tmp_path / "runs" / f"{name}.questions.jsonl.gz", pool,
                                np.asarray(ranks, dtype=np.float64), None, (1, 5))
    return ledger.record(dataset="reqa_squad", pool="dev", metrics={"mrr": 50.0},
                         questions=len(ranks), kind="pipeline", name=name, seed=seed,
                         ranks=ranks, record_file=record, path=tmp_path / "runs" / "l.jsonl")


def test_keep_copies_the_record_and_commits_the_look(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    look = _look(tmp_path, [1.0, 3.0, 2.0])
    other = _look(tmp_path, [2.0, 1.0, 1.0], name="other")
    out = io.StringIO()                     # --looks lists the ids that --keep takes
    assert main(["ledger", "--ledger", "runs/l.jsonl", "--looks", "--family", "hybrid"],
                stdout=out) == 0
    listed = json.loads(out.getvalue().strip().splitlines()[-1])["looks"]
    assert [(x["id"], x["mrr"]) for x in listed] == [(look["id"], 50.0)]
    out = io.StringIO()
    assert main(["ledger", "--ledger", "runs/l.jsonl", "--keep", look["id"][:6], "--records",
                 "results/s/records", "--seed", "1", "--config", "the pick"], stdout=out) == 0
    (kept,) = ledger.read(tmp_path / "results" / "ledger.jsonl")
    target = "results/s/records/hybrid_seed1.reqa_squad_dev.questions.jsonl.gz"
    assert kept["record"] == target and kept["seed"] == 1 and kept["config"] == "the pick"
    assert {k: v for k, v in kept.items() if k not in ("record", "seed", "config")} == \
        {k: v for k, v in look.items() if k not in ("record", "seed")}
    from retrieval_qa.evaluation.per_question import read_per_question

    assert ledger.ranks_digest(read_per_question(tmp_path / target).ranks) == look["ranks"]
    with pytest.raises(InputFileError, match="already holds"):   # twice: refused
        ledger_keep.keep([look["id"]], "runs/l.jsonl", "results/ledger.jsonl", "results/s/records",
                    seed=1)
    with pytest.raises(InputFileError, match="holds another look"):  # a name taken
        ledger_keep.keep([other["id"]], "runs/l.jsonl", "results/ledger.jsonl",
                    "results/s/records", stem="hybrid_seed1")
    with pytest.raises(InputFileError, match="ran with seed"):
        seeded = _look(tmp_path, [1.0, 1.0, 1.0], seed=2, name="seeded")
        ledger_keep.keep([seeded["id"]], "runs/l.jsonl", "results/ledger.jsonl", "x", seed=1)
    assert len(ledger.read(tmp_path / "results" / "ledger.jsonl")) == 1


def test_keep_refuses_a_record_a_later_look_replaced(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = _look(tmp_path, [1.0, 3.0, 2.0])
    _look(tmp_path, [1.0, 1.0, 1.0])        # the same record file, written again
    with pytest.raises(InputFileError, match="its ranks differ"):
        ledger_keep.keep([first["id"]], "runs/l.jsonl", "results/ledger.jsonl", "results/r")
    assert not (tmp_path / "results").exists()
    with pytest.raises(InputFileError, match="0 looks"):
        ledger_keep.keep(["ffff"], "runs/l.jsonl", "results/ledger.jsonl", "results/r")


@pytest.fixture(scope="module")
def module_scoped_places():
    """Where a module fixture (one that trains or evaluates once for its tests) would write."""
    from retrieval_qa.evaluation.ledger import ledger_path

    return {"ledger": ledger_path(), "cache": Path(os.environ["RQA_CACHE_DIR"])}


def test_fixtures_of_every_scope_write_looks_and_caches_in_the_sessions_folder(
        module_scoped_places, tmp_path_factory):
    """The tests' looks never reach the checkout's runs/ledger.jsonl: the session's ledger and
    cache are set before module fixtures run, not only around each test."""
    base = tmp_path_factory.getbasetemp()
    for name, place in module_scoped_places.items():
        assert place.is_relative_to(base), f"a module fixture's {name} is {place}"
