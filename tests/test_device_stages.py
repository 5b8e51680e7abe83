"""Work longer than a turn, cut into stages (experiments/device/): a carry set survives the
trip in parts (bit for bit, or refused naming the part), a training stage cut by the deadline
is carried into a fresh folder and evaluated there, and Table 2's JOBS=N time is computed by
the schedule reproduce_table2 follows.

The rehearsal of two turns (CPU, a tiny dual_gru): turn 1 trains until its deadline cuts it;
its newest checkpoint's weights come back as bf16 parts of at most 1 MiB, a few a poll; they
are gathered into a fresh carry-in folder, and turn 2, in a fresh work root, restores them
and tests them. What it expects: the carried weights are exactly the bf16 rounding of the
weights of a run of the same settings that was not cut and stopped at the same step (the CPU
training is deterministic), and the evaluation stage gives exactly the metrics of that uncut
run's weights rounded to bf16. Against the uncut fp32 weights, each weight moves by at most
2**-8 of its size (bf16 keeps 8 significant bits), and the metrics of the 20 test questions
stay within 10 points of MRR (a few near-tied ranks may swap); the test reports both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import torch
from device_helpers import make_world, rehearsal_env
from helpers import load_experiment

from experiments import device_check as D
from experiments.device import carry, schedule
from experiments.device.checklist import Item
from experiments.device.records import figures

TINY = ["data.batch_size=4", "trainer.compile=null", "threads=1", "logger.name=none",
        "trainer.enable_progress_bar=false", "data.max_val_questions=10",
        "data.max_test_questions=20", "test_after_fit=false"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return make_world(tmp_path_factory.mktemp("stage-world"))


# ---- the carry set's trip --------------------------------------------------------------------

def _state() -> dict:
    torch.manual_seed(0)
    return {"w": torch.randn(300, 7), "b": torch.randn(7, dtype=torch.float64),
            "steps": torch.tensor([3, 4]), "half": torch.randn(5).half()}


def test_weights_travel_as_bf16_parts_and_come_back_in_their_dtypes(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    state = _state()
    torch.save({"state_dict": state, "global_step": 12}, run / "checkpoints" / "last.ckpt")
    (run / "config.yaml").write_text("experiment: x\n")
    manifest = carry.pack_weights(run, tmp_path / "out", "x", part_bytes=1000)
    data = json.loads(manifest.read_text())
    assert data["global_step"] == 12 and len(data["parts"]) > 1
    assert all(p["bytes"] <= 1000 for p in data["parts"])
    back = carry.restore(tmp_path / "out" / "x", "x", tmp_path / "in")
    saved = torch.load(tmp_path / "in" / carry.WEIGHTS_FILE, weights_only=False)["state_dict"]
    assert back["kind"] == "weights" and (tmp_path / "in/config.yaml").read_text() == \
        "experiment: x\n"
    for key, value in state.items():   # the bf16 rounding, in the dtype it had, bit for bit
        expect = value.to(torch.bfloat16).to(value.dtype) if value.is_floating_point() else value
        assert saved[key].dtype == value.dtype and torch.equal(saved[key], expect), key
    rel = ((saved["w"] - state["w"]).abs() / state["w"].abs()).max()
    assert rel <= 2**-8


def test_a_missing_or_damaged_part_is_refused_naming_it(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "a.txt").write_text("x" * 5000)
    carry.pack_folder(folder, tmp_path / "out", "f", part_bytes=100)
    carry.restore(tmp_path / "out" / "f", "f", tmp_path / "in")
    assert (tmp_path / "in/a.txt").read_text() == "x" * 5000
    part = sorted((tmp_path / "out/f").glob("carry-f.part*"))[0]
    part.write_bytes(b"y" + part.read_bytes()[1:])
    with pytest.raises(ValueError, match=f"{part.name}: .* differs"):
        carry.restore(tmp_path / "out" / "f", "f", tmp_path / "in2")
    part.unlink()
    with pytest.raises(ValueError, match=f"{part.name}: missing"):
        carry.restore(tmp_path / "out" / "f", "f", tmp_path / "in2")
    assert not (tmp_path / "in2").exists()


# ---- two turns: a training stage cut, carried, evaluated -------------------------------------

def _stage_eval(run, *flags: str) -> dict:
    """experiments/device/stage_eval.py on a run's last.ckpt, in a subprocess (the tiny
    MiniLM package of the rehearsal's PYTHONPATH, as the turns use it)."""
    done = subprocess.run([sys.executable, "-m", "experiments.device.stage_eval",
                           "--checkpoint", str(run / "checkpoints/last.ckpt"), "--config",
                           str(run / "config.yaml"), *flags], check=True, capture_output=True,
                          text=True, env=os.environ, cwd=D.ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _train_words(runs, *extra) -> str:
    return " ".join(["rqa", "train", "experiment=dual_gru", "profile=cpu", "seed=1",
                     f"output_dir={runs}", *TINY, *extra])


def test_a_cut_training_stage_carried_into_a_fresh_turn_and_evaluated(world, tmp_path,
                                                                      monkeypatch, capsys):
    rehearsal_env(monkeypatch, world, tmp_path)
    checklist = tmp_path / "checklist.txt"
    run_dir = "{runs}/papers/dual_gru/cpu-seed1"
    checklist.write_text(
        "gru-train  0.01  cmd    " + _train_words("{runs}/papers", "trainer.max_steps=100000",
                                                 "trainer.max_epochs=1000")
        + f" && carry --weights {run_dir}\n"
        "gru-eval   0.01  train  python -m experiments.device.stage_eval {carried:gru-train} "
        "--record-dir {work}\n")
    first = ["--checklist", str(checklist), "--device", "cpu", "--part-bytes", str(2**20)]
    turn1 = [*first, "--output-root", str(tmp_path / "out1"), "--work-root", str(tmp_path / "w1")]
    assert D.main([*turn1, "--deadline", "45", "--grace", "10"]) == 0
    out = capsys.readouterr().out
    assert "stopped at the deadline: gru-train" in out and "waiting: gru-eval" not in out
    cut = json.loads((tmp_path / "out1/gru-train.partial.json").read_text())
    assert cut["status"] == "interrupted" and cut["carried"]["kind"] == "weights"
    step = cut["carried"]["global_step"]
    assert step >= 1 and cut["carried"]["parts"] >= 2 and not cut["carried"]["finished"]
    # what comes back: a few files a poll, then collected into a fresh carry-in folder
    handed = []
    for call in range(10):
        names, left = D.return_carry(tmp_path / "w1", tmp_path / f"call{call}", 2)
        handed += names
        carry.gather([tmp_path / f"call{call}" / n for n in names], tmp_path / "carry-in")
        if not left:
            break
    assert call >= 1 and len(handed) == cut["carried"]["parts"] + 1
    assert D.return_carry(tmp_path / "w1", tmp_path / "again", 2) == ([], 0)
    # turn 2: a fresh work root, the carried set only
    turn2 = [*first, "--output-root", str(tmp_path / "out2"), "--work-root", str(tmp_path / "w2"),
             "--carry-in", str(tmp_path / "carry-in"), "--only", "gru-eval"]
    assert D.main(turn2) == 0
    assert "finished now: gru-eval" in capsys.readouterr().out
    evaluated = json.loads((tmp_path / "out2/gru-eval.json").read_text())
    [stage] = evaluated["runs"]
    assert evaluated["status"] == "passed" and stage["global_steps"] == step
    assert stage["seed"] == 1 and "REDUCED" in stage["description"]
    assert stage["test_pool"]["pool"] == "dev" and stage["test_pool"]["questions"] == 20
    # its look on the ledger, with the per-question record a bundle brings back
    from retrieval_qa.evaluation import ledger
    from retrieval_qa.evaluation.per_question import read_per_question

    record = tmp_path / "w2/gru-eval/stage_eval.questions.jsonl.gz"
    [look] = [e for e in ledger.read(os.environ["RQA_LEDGER"])
              if e["record"] == str(record.resolve())]
    assert look["kind"] == "train" and look["seed"] == 1 and look["questions"] == 20
    assert look["family"] == "rehearsal_papers"       # a GPU turn's: gpu_papers, not a CPU study's
    assert look["ranks"] == ledger.ranks_digest(read_per_question(record).ranks)
    assert look["metrics"]["mrr"] == pytest.approx(stage["mrr"], abs=1e-4)
    # the run that was not cut: the same settings, stopped at the same step
    uncut = tmp_path / "uncut"
    subprocess.run([sys.executable, "-m", "retrieval_qa.cli", *_train_words(
        uncut, f"trainer.max_steps={step}", "trainer.max_epochs=1000").split()[1:]],
        check=True, capture_output=True, env=os.environ)
    uncut_run = uncut / "dual_gru" / "cpu-seed1"
    reference = torch.load(uncut_run / "checkpoints/last.ckpt", weights_only=False)
    assert reference["global_step"] == step
    carried = torch.load(tmp_path / "w2/carried/gru-train" / carry.WEIGHTS_FILE,
                         weights_only=False)["state_dict"]
    rounded, _ = carry.to_bf16(reference["state_dict"])
    for key, value in reference["state_dict"].items():
        assert torch.equal(carried[key], rounded[key].to(value.dtype)), key
    same = _stage_eval(uncut_run, "--round-bf16")
    assert {k: stage[k] for k in ("mrr", "r@1", "r@5")} == \
        {k: same["test"]["metrics"][k] for k in ("mrr", "r@1", "r@5")}
    fp32 = _stage_eval(uncut_run)
    print(f"MRR after the bf16 trip {stage['mrr']} against fp32 {fp32['test']['metrics']['mrr']}")
    assert abs(stage["mrr"] - fp32["test"]["metrics"]["mrr"]) <= 10


# ---- Table 2's JOBS=N time --------------------------------------------------------------------

def test_list_schedule():
    plan = schedule.list_schedule([("a", 4), ("b", 1), ("c", 1), ("d", 3)], 2)
    assert plan["makespan"] == 5
    assert [(p["row"], p["worker"], p["start"]) for p in plan["rows"]] == \
        [("a", 0, 0), ("b", 1, 0), ("c", 1, 1), ("d", 1, 2)]
    assert schedule.list_schedule([("a", 2), ("b", 3)], 1)["makespan"] == 5
    with pytest.raises(ValueError):
        schedule.list_schedule([("a", 1)], 0)


def test_the_computed_jobs_time_is_reproduce_table2s_schedule(tmp_path, monkeypatch, capsys):
    sleeps = {"bm25": 0.6, "dual_rnn": 0.3, "dual_gru": 0.5, "dual_lstm": 0.4,
              "dual_bert": 0.9}
    monkeypatch.setenv("RQA_TABLE2_RUNNER", "device_helpers:sleeping_rqa")
    monkeypatch.setenv("RQA_FAKE_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("RQA_FAKE_SLEEP", json.dumps(sleeps))
    monkeypatch.setenv("RQA_FAKE_TIMES", str(tmp_path / "times.jsonl"))
    script = load_experiment("reproduce_table2")
    out = tmp_path / "table2"
    t0 = time.monotonic()
    assert script.main(["--rows", "BM25,Dual-RNNs,Dual-GRUs,Dual-LSTMs,Dual-BERTs", "--out",
                        str(out), "--jobs", "2"]) == 0
    wall = time.monotonic() - t0
    capsys.readouterr()
    record = {"item": "table2-x", "kind": "table2", "status": "passed",
              **figures(Item("table2-x", 1, "table2", ""), {"status": {}}, out)}
    (tmp_path / "records").mkdir()
    (tmp_path / "records/table2-x.json").write_text(json.dumps(record))
    computed = schedule.compute(tmp_path / "records", 2)
    rows = ["BM25", "Dual-RNNs", "Dual-GRUs", "Dual-LSTMs", "Dual-BERTs"]
    assert [r["row"] for r in computed["rows"]] == rows       # the table's order
    assert set(computed["missing_rows"]) == set(schedule.table_rows()) - set(rows)
    assert computed["jobs_seconds"] is None                    # not every row: no figure
    measured = schedule.list_schedule([(r["row"], r["seconds"]) for r in computed["rows"]], 2)
    assert wall >= measured["makespan"]
    # each row started when the schedule says, give or take the calls' own time
    starts = {}
    for at, _, key in map(json.loads, (tmp_path / "times.jsonl").read_text().splitlines()):
        starts.setdefault(key, at)
    first = min(starts.values())
    keys = {"BM25": "bm25", "Dual-RNNs": "dual_rnn", "Dual-GRUs": "dual_gru",
            "Dual-LSTMs": "dual_lstm", "Dual-BERTs": "dual_bert"}
    for placed in measured["rows"]:
        assert abs(starts[keys[placed["row"]]] - first - placed["start"]) < 0.4, placed
    end = max(starts[keys[r["row"]]] - first + r["seconds"] for r in computed["rows"])
    assert abs(end - measured["makespan"]) < 0.4, (end, measured["makespan"])
