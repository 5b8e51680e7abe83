"""experiments/device_check.py: the checklist's items (every experiment's smoke run, the benches,
Table 2, the queue) parse and their commands are valid; the CPU rehearsal runs items into
their JSON on tiny data and a tiny MiniLM; a finished item is never run again; the deadline
stops a running item with SIGTERM and the next call runs it again, where it continues from
its own checkpoint; a failed item keeps its error; a resumable queue restores its finished
runs, except those a run still to do reads; detach, status, bundle and unbundle (a turn's
looks come back with their per-question records and are kept here)."""

from __future__ import annotations

import importlib
import json
import os
import shlex
import sys
import textwrap
import time
from pathlib import Path

import pytest
from device_helpers import make_world, rehearsal_env

from experiments import device_check as D
from experiments.device import schedule
from retrieval_qa.cli import build_parser
from retrieval_qa.config import conf_names
from retrieval_qa.training.compose import compose

FIELDS = {"item", "command", "device", "versions", "status", "seconds", "expected_minutes",
          "rehearsal", "output"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return make_world(tmp_path_factory.mktemp("device-world"))


def _main(*args: str, capsys=None) -> str:
    assert D.main(list(args)) == 0
    return capsys.readouterr().out if capsys is not None else ""


def _ctx(tmp_path, device="cuda") -> D.Context:
    return D.Context(device, tmp_path / "out", tmp_path / "work", time.monotonic() + 3600,
                     grace=D.GRACE_S[device])


def test_the_checklist_in_priority_order_and_every_command_valid(tmp_path):
    items = D.parse_checklist()
    smoke = [i for i in items if i.kind == "smoke"]
    assert [i.id for i in smoke] == [f"smoke-{e}" for e in conf_names("experiment")
                                     if e not in D.SAME_GPU_PROFILE] + ["smoke-distill_hour"]
    order = [i.kind for i in items]
    assert order.index("smoke") < order.index("bench") < order.index("train") \
        < order.index("computed")
    assert "queue" not in order                     # a queue cut at a turn's end starts over
    assert all(i.minutes > 0 for i in items)
    ctx = _ctx(tmp_path)
    for item in items:
        for step in D.steps_of(item, ctx):
            argv = step.argv
            if argv[0] == "rqa":
                args = build_parser().parse_args(argv[1:])
                if argv[1] == "train":
                    cfg = compose(args.overrides)
                    assert cfg.profile == "gpu", item.id
                    if item.kind == "smoke":   # the profile's own precision and compile
                        assert not any(w.startswith(("trainer.precision", "trainer.compile"))
                                       for w in argv), item.id
                    else:                      # the full pools, never the smoke's caps
                        assert not any(k in w for w in argv for k in ("max_test", "max_val",
                                                                      "max_steps")), item.id
            elif argv[0] == "python" and argv[1] == "-m" and argv[2].startswith("bench."):
                bench = importlib.import_module(argv[2])
                bench.parse_args(argv[3:])           # every option exists
                assert "--device" in argv and "cuda" in argv
            elif argv[0] == "make" and item.kind == "recipe":  # timed, its rerankers on the GPU
                assert f"TIMES={ctx.work_root / item.id}/times.tsv" in argv, item.id
                assert "RERANKER_ARGS=model.training.accelerator=auto" in argv, item.id
            elif argv[0] == "make":
                assert argv[1] == "reproduce-table2" and "JOBS=4" not in argv
                assert len([w for w in argv if w.startswith("ROWS=")]) == 1
                assert "," not in next(w for w in argv if w.startswith("ROWS="))  # one row
            elif argv[0] == "carry":
                assert item.kind == "train" and argv[1].startswith(str(ctx.work_root))
    rows = {next(w for w in D.words_of(i.command)[0] if w.startswith("ROWS="))[5:]
            for i in items if i.kind == "table2"}
    assert rows == set(schedule.table_rows())       # every row of Table 2, one item each
    computed = next(i for i in items if i.kind == "computed")
    assert {ident for _, ident in computed.needs()} == {i.id for i in items
                                                         if i.kind == "table2"}


def test_every_item_fits_one_turn_in_the_issues_order():
    """Each estimate fits what a turn leaves the checklist; the items left make whole turns;
    the next turns take the new recipes' smokes, then the four papers in the issue's order,
    then Table 2's rows."""
    items = D.parse_checklist()
    assert all(i.minutes * 60 <= D.TURN_SECONDS for i in items), \
        [i.id for i in items if i.minutes * 60 > D.TURN_SECONDS]
    done = {p.stem for p in D.OUTPUT_ROOT.glob("*.json") if not p.stem.endswith(".partial")}
    turns, never = D.plan_turns(items, done)
    assert not never and all(sum(i.minutes for i in t) * 60 <= D.TURN_SECONDS for t in turns)
    # the smokes not yet run first: distill_hour's (named), distill_plus's (derived from conf/)
    assert {i.id for i in turns[0][:2]} == {"smoke-distill_hour", "smoke-distill_plus"}
    ids = [i.id for i in items if i.id not in done]
    papers = ["paper-fcrr", "paper-sde", "paper-ade", "table2-Dual-VAEs", "mining-chain",
              "paper-mining_dual_augmented", "paper-mining_dual_unweighted",
              "table2-ENDX-GRUs", "table2-Cross-VAEs", "paper-mining_dual"]
    assert [i for i in ids if i in papers] == [p for p in papers if p not in done]
    first_row = min(ids.index(i) for i in ids if i.startswith("table2-") and i not in papers)
    assert ids.index("paper-mining_dual") < first_row
    for item in items:                              # an awaited item comes first
        for _, ident in item.needs():
            assert [i.id for i in items].index(ident) < [i.id for i in items].index(item.id)


def test_smoke_caps_and_mining_prerequisites(tmp_path):
    ctx = _ctx(tmp_path)
    items = {i.id: i for i in D.parse_checklist()}
    [gru] = D.steps_of(items["smoke-dual_gru"], ctx)
    assert "data.max_val_questions=500" in gru.argv and "data.max_test_questions=1000" in gru.argv
    assert "trainer.max_steps=30" in gru.argv and gru.skip_if is None
    fcrr = D.steps_of(items["smoke-fcrr"], ctx)[-1].argv
    assert "data.val_questions=500" in fcrr and not any("max_test" in w for w in fcrr)
    export, classifier, mine, train = D.steps_of(items["smoke-mining_dual_augmented"], ctx)
    prereq = ctx.work_root / "smoke-prerequisites"
    assert export.argv[:2] == ["rqa", "export"] and export.skip_if == prereq / "retriever/model.json"
    assert classifier.skip_if == prereq / "mining_classifier/gpu-seed1/result.json"
    assert mine.argv[:2] == ["rqa", "mine"] and f"data.mined={prereq / 'mined'}" in train.argv
    rehearsed = D.steps_of(items["smoke-mining_dual_augmented"], _ctx(tmp_path, "cpu"))
    assert all("trainer.max_steps=2" in s.argv for s in rehearsed if s.argv[1] == "train")


def test_rehearsal_shrinks_each_kind():
    bench = D.shrink(shlex.split("python -m bench.bench_encoding --device cuda --precision "
                                 "bf16-mixed --n 20000 --cuda-graphs --out X"), "bench")
    assert bench[bench.index("--device") + 1] == "cpu" and bench[bench.index("--n") + 1] == "48"
    assert "--cuda-graphs" in bench and bench[bench.index("--out") + 1] == "X"
    table = D.shrink(["make", "reproduce-table2", "PROFILE=gpu", "JOBS=4"], "table2")
    assert "ROWS=BM25,Dual-GRUs" in table and table[-1].startswith("TRAIN_OVERRIDES=")
    queue = D.shrink(["python", "experiments/run_queue.py", "q.txt"], "queue")
    assert queue[queue.index("--through") + 1] == "first pass"
    assert "--train-overrides" in queue
    assert D.resolve(["make", "x"])[-1] == "STAMP="
    assert D.shrink(["make", "distill-plus-train", "SEED=1"], "recipe")[-1] == "-n"


def test_a_recipe_records_its_trainings_and_its_steps_times(tmp_path):
    """A recipe item's figures: every `rqa train` report and reranker report its make printed
    (the last training's metrics at the top) and each timed step's seconds."""
    from experiments.device.records import json_lines, recipe_figures

    stdout = "\n".join([
        "make: bash experiments/timed.sh ...", json.dumps({"steps_planned": 500, "steps_done": 500,
                                                          "questions": 4000, "train_seconds": 21.5}),
        "{not json", json.dumps({"experiment": "distill_plus", "global_steps": 900, "seed": 1,
                                 "test": {"metrics": {"mrr": 77.1}, "dataset": "reqa_squad",
                                          "pool": "dev", "questions": 10539}})])
    reports = json_lines(stdout)
    assert len(reports) == 2
    (tmp_path / "times.tsv").write_text("start\tstep\tseconds\tstatus\tthreads\n"
                                        "2026-12-04T00:00:00Z\treranker\t41\t0\tdefault\n"
                                        "2026-12-04T00:01:00Z\tdistillation\t95\t0\tdefault\n")
    out = recipe_figures(reports, tmp_path)
    assert out["mrr"] == 77.1 and out["seed"] == 1 and out["test_pool"]["pool"] == "dev"
    assert [r["steps_done"] for r in out["rerankers"]] == [500]
    assert out["step_seconds"] == {"reranker": 41, "distillation": 95}
    assert recipe_figures([], tmp_path / "none") == {"runs": [], "rerankers": []}
    assert D.resolve(["rqa", "train"])[:3] == [sys.executable, "-m", "retrieval_qa.cli"]


def _check_record(record: dict, item: str, kind: str) -> None:
    assert FIELDS <= set(record), FIELDS - set(record)
    assert record["item"] == item and record["kind"] == kind and record["status"] == "passed"
    assert record["rehearsal"] is True and record["device"].startswith("CPU")
    assert record["versions"]["torch"] and record["seconds"] > 0
    assert "/" not in record["command"].split()[0]              # `rqa` / `python`, no path


def test_rehearsal_runs_items_into_json_and_never_twice(world, tmp_path, monkeypatch, capsys):
    rehearsal_env(monkeypatch, world, tmp_path)
    args = ("--device", "cpu", "--output-root", str(tmp_path / "out"), "--work-root",
            str(tmp_path / "work"), "--only", "smoke-dual_gru,enc-b128")
    out = _main(*args, capsys=capsys)
    assert "finished now: smoke-dual_gru, enc-b128" in out
    smoke = json.loads((tmp_path / "out/smoke-dual_gru.json").read_text())
    _check_record(smoke, "smoke-dual_gru", "smoke")
    assert smoke["global_steps"] == 2 and smoke["compile"] is None
    assert 0 <= smoke["mrr"] <= 100 and smoke["test_questions"] > 0
    assert "trainer.max_steps=2" in smoke["command"]
    bench = json.loads((tmp_path / "out/enc-b128.json").read_text())
    _check_record(bench, "enc-b128", "bench")
    assert bench["ratio_ours_over_st"] > 0 and bench["ours_texts_per_s"] > 0
    assert bench["gpu_busy_mean"] is None and "no GPU" in \
        bench["gpu_busy_missing_because"]
    before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "out").iterdir()}
    out = _main(*args, capsys=capsys)                          # again: nothing runs
    assert "finished now: none" in out and "left: 0 items" in out
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "out").iterdir()} == before
    status = _main("--status", *args, capsys=capsys)
    assert "smoke-dual_gru" in status and "passed in" in status and "ratio_ours_over_st" in status


@pytest.mark.slow
def test_the_whole_checklist_rehearsed(world, tmp_path, monkeypatch, capsys):
    rehearsal_env(monkeypatch, world, tmp_path)
    args = ("--device", "cpu", "--output-root", str(tmp_path / "out"), "--work-root",
            str(tmp_path / "work"))
    out = _main(*args, capsys=capsys)
    assert "left: 0 items" in out, out
    for item in D.parse_checklist():
        record = json.loads((tmp_path / "out" / f"{item.id}.json").read_text())
        assert record["status"] == "passed", (item.id, record.get("error"))
    rows = json.loads((tmp_path / "out/table2-Dual-GRUs.json").read_text())
    assert set(rows["rows"]) == {"Dual-GRUs-dev"} and rows["rows"]["Dual-GRUs-dev"]["seconds"] > 0
    computed = json.loads((tmp_path / "out/table2-jobs4-computed.json").read_text())
    assert computed["complete"] and computed["jobs_seconds"] > 0
    evaluate = json.loads((tmp_path / "out/devpool-eval.json").read_text())
    assert evaluate["dev_pool_seconds"] > 0


def test_rehearsal_composes_the_recipes_without_running_them(world, tmp_path, monkeypatch,
                                                               capsys):
    """A recipe item in the rehearsal: its make target composed (``-n``), nothing trained,
    its record a recipe's with no figures."""
    rehearsal_env(monkeypatch, world, tmp_path)
    _main("--device", "cpu", "--output-root", str(tmp_path / "out"), "--work-root",
          str(tmp_path / "work"), "--only", "recipe-distill_plus,recipe-reader_q12k",
          capsys=capsys)
    for item in ("recipe-distill_plus", "recipe-reader_q12k"):
        record = json.loads((tmp_path / "out" / f"{item}.json").read_text())
        assert FIELDS <= set(record) and record["status"] == "passed"   # instantly: -n
        assert record["kind"] == "recipe" and record["rehearsal"] is True
        assert record["command"].endswith(" -n") and "TIMES=" in record["command"]
        assert record["runs"] == [] and record["rerankers"] == []
    assert not (tmp_path / "work/recipe-distill_plus/times.tsv").exists()


def test_rehearsal_of_the_paper_items_and_the_matched_bench(world, tmp_path, monkeypatch,
                                                            capsys):
    """The mining chain in one item, its mined pairs carried to the dual encoder that reads
    them (the same turn: restored from this machine's carry set); each run's seed, reductions
    and test pool recorded; the matched training bench through the Trainer loop."""
    rehearsal_env(monkeypatch, world, tmp_path)
    out = _main("--device", "cpu", "--output-root", str(tmp_path / "out"), "--work-root",
                str(tmp_path / "work"), "--only",
                "mining-chain,paper-mining_dual_augmented,train-matched", capsys=capsys)
    assert "finished now: mining-chain, paper-mining_dual_augmented, train-matched" in out, out
    chain = json.loads((tmp_path / "out/mining-chain.json").read_text())
    _check_record(chain, "mining-chain", "train")
    [classifier] = chain["runs"]
    assert classifier["experiment"] == "mining_classifier" and classifier["seed"] == 1
    assert "REDUCED" in classifier["description"] and classifier["test_pool"]["dataset"]
    assert chain["mine"]["mined_pairs"] >= 0 and chain["carried"]["kind"] == "folder"
    dual = json.loads((tmp_path / "out/paper-mining_dual_augmented.json").read_text())
    _check_record(dual, "paper-mining_dual_augmented", "train")
    assert dual["seed"] == 1 and "mrr" in dual and dual["test_pool"]["questions"] > 0
    assert str(tmp_path / "work/carried/mining-chain") in dual["command"] or \
        "carried/mining-chain" in dual["command"]
    bench = json.loads((tmp_path / "out/train-matched.json").read_text())
    _check_record(bench, "train-matched", "bench")
    assert bench["setup"] == "matched" and len(bench["ratio_per_round"]) == 2
    assert bench["flops"]["ours"]["achieved_tflops"] > 0 and bench["gpu_busy_mean"] is None


# ---- deadline, resume, failure: items of a checklist of plain commands -----------------------

#: a stand-in for `rqa train`: counts to 40 in steps of 0.1 s from its checkpoint, writes the
#: checkpoint on SIGTERM and exits, prints its JSON when done
COUNTER = textwrap.dedent("""
    import json, signal, sys, time
    from pathlib import Path
    ckpt = Path(sys.argv[1])
    step = int(ckpt.read_text()) if ckpt.exists() else 0
    start = step
    def stop(*_):
        ckpt.write_text(str(step)); sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    while step < 40:
        time.sleep(0.1); step += 1
    print(json.dumps({"resumed_from": start, "steps": step}))
""")


def _checklist(tmp_path, lines: list[str]) -> Path:
    path = tmp_path / "checklist.txt"
    path.write_text("# test\n" + "\n".join(lines) + "\n")
    return path


def test_deadline_sigterm_then_the_next_call_continues(tmp_path, capsys):
    script = tmp_path / "counter.py"
    script.write_text(COUNTER)
    checklist = _checklist(tmp_path, [
        f"count   0.05  cmd  python {script} {{work}}/ckpt",
        "later   0.01  cmd  python -c print(1)"])
    args = ("--checklist", str(checklist), "--device", "cpu", "--output-root",
            str(tmp_path / "out"), "--work-root", str(tmp_path / "work"))
    t0 = time.monotonic()
    out = _main(*args, "--deadline", "4", "--grace", "1.5", capsys=capsys)
    assert time.monotonic() - t0 < 4 + 1
    assert "interrupted" in out and "stopped at the deadline: count" in out
    assert not (tmp_path / "out/count.json").exists()          # not finished: runs again
    stopped = json.loads((tmp_path / "out/count.partial.json").read_text())
    assert stopped["status"] == "interrupted" and "runs again" in stopped["stopped"]
    reached = int((tmp_path / "work/count/ckpt").read_text())   # SIGTERM, not SIGKILL
    assert 0 < reached < 40
    assert "later" in out and "left: 2 items" in out             # no time left for it
    out = _main(*args, capsys=capsys)                           # no deadline
    record = json.loads((tmp_path / "out/count.json").read_text())
    assert record["status"] == "passed" and record["output"] == {"resumed_from": reached,
                                                                 "steps": 40}
    assert (tmp_path / "out/later.json").exists() and "left: 0 items" in out


def test_items_that_do_not_fit_are_passed_over(tmp_path, capsys):
    checklist = _checklist(tmp_path, ["big    60    cmd  python -c print(1)",
                                      "small  0.01  cmd  python -c print(2)"])
    out = _main("--checklist", str(checklist), "--device", "cpu", "--output-root",
                str(tmp_path / "out"), "--work-root", str(tmp_path / "work"),
                "--deadline", "60", "--grace", "1", "--estimate-scale", "1", capsys=capsys)
    assert "did not fit: big" in out and "finished now: small" in out
    assert not (tmp_path / "out/big.json").exists()


def test_a_failed_item_keeps_its_error_and_reruns_only_when_asked(tmp_path, capsys):
    checklist = _checklist(tmp_path, [
        "boom  0.01  cmd  python -c \"import sys; print('bad value in x.yaml', "
        "file=sys.stderr); sys.exit(3)\""])
    args = ("--checklist", str(checklist), "--device", "cpu", "--output-root",
            str(tmp_path / "out"), "--work-root", str(tmp_path / "work"))
    _main(*args, capsys=capsys)
    record = json.loads((tmp_path / "out/boom.json").read_text())
    assert record["status"] == "failed" and record["exit_code"] == 3
    assert "bad value in x.yaml" in record["error"]
    assert D.shorten_paths("at /usr/lib/python3.12/subprocess.py line 3") == \
        "at .../python3.12/subprocess.py line 3"
    assert "finished now: none" in _main(*args, capsys=capsys)
    assert "finished now: boom" in _main(*args, "--retry-failed", capsys=capsys)


def test_the_rehearsal_never_writes_into_the_committed_results(tmp_path):
    with pytest.raises(SystemExit, match="rehearsal"):
        D.main(["--device", "cpu", "--output-root", str(D.OUTPUT_ROOT), "--work-root",
                str(tmp_path)])


def test_detach_status_bundle_unbundle(tmp_path, capsys):
    # the item waits for a release file, so that "detach returns while it runs" holds however
    # slow the machine is (no timed assertion)
    release = tmp_path / "release"
    script = tmp_path / "wait.py"
    script.write_text(f"import json, pathlib, time\n"
                      f"for _ in range(1200):\n"
                      f"    if pathlib.Path({str(release)!r}).exists(): break\n"
                      f"    time.sleep(0.05)\n"
                      f"print(json.dumps({{'x': 1}}))\n")
    checklist = _checklist(tmp_path, [f"wait  0.01  cmd  python {script}"])
    args = ("--checklist", str(checklist), "--device", "cpu", "--output-root",
            str(tmp_path / "out"), "--work-root", str(tmp_path / "work"))
    assert "started in the background" in _main(*args, "--detach", capsys=capsys)
    assert not (tmp_path / "out/wait.json").exists()      # returned while the item waits
    # at once, before the child has written its own status: already running (a poll waits)
    assert _main(*args, "--status", capsys=capsys).startswith("device-check running")
    for _ in range(100):
        status = _main(*args, "--status", capsys=capsys)
        if "running since" in status:
            break
        time.sleep(0.1)
    assert "device-check running" in status
    release.touch()
    for _ in range(600):
        if (tmp_path / "out/wait.json").exists():
            break
        time.sleep(0.1)
    time.sleep(0.5)
    status = _main(*args, "--status", capsys=capsys)
    assert "wait" in status and "passed in" in status and "device-check not running" in status
    bundle = tmp_path / "b" / "device-check.tar.gz"
    _main(*args, "--bundle", str(bundle), capsys=capsys)
    written = D.unbundle(bundle, tmp_path / "collected", tmp_path / "logs")
    assert json.loads((tmp_path / "collected/wait.json").read_text())["output"] == {"x": 1}
    assert (tmp_path / "logs/device-check.log").is_file()
    assert str(tmp_path / "logs/wait/item.log") in written



def _device_look(work: Path, run: str, ranks: list[float]) -> dict:
    """A look a turn's training logged (a run's test and its per-question record)."""
    import numpy as np

    from retrieval_qa.data import Candidate, RetrievalPool
    from retrieval_qa.evaluation import ledger
    from retrieval_qa.evaluation.per_question import write_per_question

    pool = RetrievalPool("toy", "dev", [Candidate(f"c{i}", f"s{i}", "", f"d{i}")
                                        for i in range(4)],
                         questions=["q0", "q1", "q2"], gold=[[0], [1], [2]])
    record = write_per_question(work / run / "per_question.jsonl.gz", pool,
                                np.asarray(ranks), None, (1, 5))
    return ledger.record(dataset="reqa_squad", pool="dev", metrics={"mrr": 50.0},
                         questions=3, kind="train", name=run.split("/")[1], seed=1,
                         ranks=ranks, record_file=record, path=work / "ledger.jsonl")


def test_a_turns_looks_come_back_with_their_records_and_are_kept_here(tmp_path, monkeypatch):
    from experiments.device import status
    from retrieval_qa.errors import InputFileError
    from retrieval_qa.evaluation import ledger, ledger_keep

    device = tmp_path / "device"        # the GPU machine's checkout: its runs/device-check
    work = device / "runs/device-check"
    device.mkdir()
    monkeypatch.chdir(device)
    kept = _device_look(work, "papers/sde/gpu-seed1", [1.0, 2.0, 4.0])
    lost = _device_look(work, "papers/ade/gpu-seed1", [2.0, 1.0, 1.0])
    assert kept["record"] == "runs/device-check/papers/sde/gpu-seed1/per_question.jsonl.gz"
    (work / "papers/ade/gpu-seed1/per_question.jsonl.gz").unlink()   # one that did not
    (work / "papers/sde/item.log").write_bytes(os.urandom(60_000))
    (tmp_path / "out").mkdir()
    monkeypatch.setattr(status, "BUNDLE_LIMIT", 30_000)   # the logs cannot come back
    bundle = status.bundle(tmp_path / "b/device-check.tar.gz", tmp_path / "out", work)
    here = tmp_path / "here"                              # this checkout, collecting
    here.mkdir()
    monkeypatch.chdir(here)
    written = status.unbundle(bundle, here / "checklist", here / "runs/collected")
    assert not any(w.endswith("item.log") for w in written)
    looks = {e["id"]: e for e in ledger.read(here / "runs/collected/ledger.jsonl")}
    assert looks[kept["id"]]["record"] == str(here / "runs/collected/papers/sde/gpu-seed1"
                                              / "per_question.jsonl.gz")
    assert looks[lost["id"]]["record"] == lost["record"]  # not back: its path, as logged
    ledger_keep.keep([kept["id"]], "runs/collected/ledger.jsonl", "results/ledger.jsonl",
                     "results/gpu/records", stem="sde_gpu")
    (line,) = ledger.read(here / "results/ledger.jsonl")
    assert line["record"] == "results/gpu/records/sde_gpu.reqa_squad_dev.questions.jsonl.gz"
    with pytest.raises(InputFileError, match="is not a file"):
        ledger_keep.keep([lost["id"]], "runs/collected/ledger.jsonl", "results/ledger.jsonl",
                         "results/gpu/records", stem="ade_gpu")


def test_a_turns_look_families_are_the_gpu_results_families():
    import yaml

    from experiments.device.checklist import LEDGER_FAMILY

    claims = yaml.safe_load((D.ROOT / "results/gpu/claims.yaml").read_text())["claims"]
    used = {c["family"] for c in claims if c.get("family")}
    assert used and used <= {f"gpu_{name}" for name in LEDGER_FAMILY.values()}

# ---- the queue's finished runs, restored on a fresh machine ----------------------------------

def test_queue_restores_finished_runs_except_those_a_run_to_do_reads(tmp_path):
    queue = tmp_path / "q.txt"
    queue.write_text("# --- first pass ---\n"
                     "m/retriever  rqa export experiment=mining_dual --output {out}\n"
                     "m   experiment=mining_classifier profile=gpu "
                     "data.dense_retriever={root}/m/retriever\n"
                     "a   experiment=fcrr profile=gpu seed=1\n"
                     "m/mined  rqa mine --classifier {root}/m/mining_classifier/gpu-seed42/model "
                     "--retriever {root}/m/retriever --output {out}\n")
    item = D.Item("q-first", 1, "queue", f"python experiments/run_queue.py {queue} "
                                         "--output-root {runs}/q --deadline-s {deadline}")
    ctx = _ctx(tmp_path)
    root = ctx.work_root / "q"
    ctx.output_root.mkdir(parents=True)
    recorded = {"m/retriever": {"marker": True, "result": {"command": ["export"]}},
                "m/mining_classifier/gpu-seed42": {"marker": False, "result": {"test": {}},
                                                   "config": "experiment: mining_classifier\n"},
                "a/fcrr/gpu-seed1": {"marker": False, "result": {"test": {"metrics": {
                    "mrr": 50.0}}}, "config": "experiment: fcrr\n"}}
    (ctx.output_root / "q-first.partial.json").write_text(json.dumps(
        {"item": "q-first", "kind": "queue", "status": "partial", "runs": recorded}))
    # `m/mined` is still to do and reads the retriever and the classifier: they run again
    assert D.restore_queue(item, ctx) == ["a/fcrr/gpu-seed1"]
    assert json.loads((root / "a/fcrr/gpu-seed1/result.json").read_text())["test"]["metrics"][
        "mrr"] == 50.0
    # with its config: `rqa train` reuses a run only beside the settings it ran with
    assert (root / "a/fcrr/gpu-seed1/config.yaml").read_text() == "experiment: fcrr\n"
    records = D.queue_records(item, ctx)
    assert set(records) == {"a/fcrr/gpu-seed1"} and records["a/fcrr/gpu-seed1"]["mrr"] == 50.0
    # once `m/mined` is recorded too, everything is restored
    recorded["m/mined"] = {"marker": True, "result": {"command": ["mine"]}}
    (ctx.output_root / "q-first.partial.json").write_text(json.dumps(
        {"item": "q-first", "kind": "queue", "status": "partial", "runs": recorded}))
    assert sorted(D.restore_queue(item, ctx)) == ["m/mined", "m/mining_classifier/gpu-seed42",
                                                  "m/retriever"]
    assert (root / "m/retriever.done").is_file() and (root / "m/mined.done").is_file()


def test_a_checklist_line_of_the_wrong_form_names_the_line(tmp_path):
    with pytest.raises(ValueError, match=r"checklist.txt:2: expected 'ID MINUTES KIND"):
        D.parse_checklist(_checklist(tmp_path, ["x y"]))
    with pytest.raises(ValueError, match="kind 'fit' is not one of"):
        D.parse_checklist(_checklist(tmp_path, ["x 1 fit rqa train"]))


def test_no_script_of_experiments_or_bench_passes_400_lines():
    """The package's limit (tests/test_import_layers.py) over experiments/ and bench/ too."""
    over = {str(p.relative_to(D.ROOT)): n for folder in ("experiments", "bench")
            for p in (D.ROOT / folder).rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 400}
    assert not over, over
