"""experiments/run_queue.py (retrieval_qa/sweeps/queue.py on the one runner): `rqa train`
lines and arbitrary `rqa` command lines, resumable (done runs skipped, a failed command not
marked done); lines made from conf/ (`@experiments`, `@folder`); and the committed GPU queue:
every training line composes under its gpu profile, every command line parses as an `rqa`
command."""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from experiments import run_queue as Q
from experiments.device_check import SAME_GPU_PROFILE
from retrieval_qa.cli import build_parser
from retrieval_qa.sweeps import runner as R
from retrieval_qa.training.compose import compose
from retrieval_qa.training.run_folder import run_dir

QUEUES = Path(Q.__file__).parent / "queues"


class _Done:
    """A finished process, as the runner polls it."""

    def __init__(self, code: int) -> None:
        self.code, self.pid = code, -1

    def poll(self):
        return self.code

    wait = poll

    def send_signal(self, sig):
        pass

    kill = send_signal


def _fake_rqa(calls, fail=()):
    """A stand-in for subprocess.Popen of `python -m retrieval_qa.cli ...`: what the command
    leaves, at once."""
    def popen(cmd, stdout=None, **kwargs):
        words = cmd[3:]                         # after python -m retrieval_qa.cli
        calls.append(words)
        if words[0] in fail:
            return _Done(1)
        if words[0] == "train":  # what rqa train leaves: its config and its result
            cfg = compose(words[1:])
            where = run_dir(cfg)
            where.mkdir(parents=True)
            (where / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
            (where / "result.json").write_text("{}")
        if hasattr(stdout, "write"):
            stdout.write('{"ok": true}\n')
        return _Done(0)
    return popen


def test_train_and_command_lines_run_once_with_placeholders(tmp_path, monkeypatch):
    queue = tmp_path / "q.txt"
    queue.write_text("# a comment\n"
                     "m/retriever  rqa export experiment=mining_dual --output {out}\n"
                     "m   experiment=mining_classifier data.dense_retriever={root}/m/retriever\n"
                     "m/mined  rqa mine --classifier {root}/m/x --output {out}  # mined\n")
    root = tmp_path / "runs"
    calls = []
    monkeypatch.setattr(R, "popen", _fake_rqa(calls, fail={"mine"}))
    summary = Q.main([str(queue), "--output-root", str(root)])
    assert [c[0] for c in calls] == ["export", "train", "mine"]
    assert calls[0] == ["export", "experiment=mining_dual", "--output", str(root / "m/retriever")]
    assert f"data.dense_retriever={root}/m/retriever" in calls[1]
    assert f"output_dir={root / 'm'}" in calls[1]
    assert [s["state"] for s in summary] == ["finished", "finished", "failed (1)"]
    assert json.loads((root / "m/retriever.done").read_text())["command"][0] == "export"
    assert '{"ok": true}' in (root / "m/retriever.log").read_text()
    assert not (root / "m/mined.done").exists()

    calls.clear()                               # again: only the failed command reruns
    monkeypatch.setattr(R, "popen", _fake_rqa(calls))
    summary = Q.main([str(queue), "--output-root", str(root)])
    assert [c[0] for c in calls] == ["mine"]
    assert [s["state"] for s in summary] == ["reused", "reused", "finished"]

    # the lines changed: a finished run or a done command of other settings is not reused
    calls.clear()
    queue.write_text("m/retriever  rqa export experiment=mining_dual seed=3 --output {out}\n"
                     "m   experiment=mining_classifier data.dense_retriever={root}/m/retriever "
                     "data.batch_size=4\n")
    summary = Q.main([str(queue), "--output-root", str(root)])
    assert calls == [] and [s["state"] for s in summary] == ["refused", "refused"]
    assert "records another command" in summary[0]["error"]
    assert "data.batch_size: " in summary[1]["error"] and "-> 4" in summary[1]["error"]


def test_deadline_leaves_the_rest(tmp_path, monkeypatch):
    queue = tmp_path / "q.txt"
    queue.write_text("a experiment=fcrr seed=1\na experiment=fcrr seed=2\n")
    calls = []
    monkeypatch.setattr(R, "popen", _fake_rqa(calls))
    summary = Q.main([str(queue), "--output-root", str(tmp_path), "--deadline-s", "-1"])
    assert calls == [] and [s["state"] for s in summary] == ["left", "left"]


def test_a_line_of_neither_form_names_the_line(tmp_path):
    queue = tmp_path / "q.txt"
    queue.write_text("\nfolder profile=gpu\n")
    with pytest.raises(ValueError, match=r"q.txt:2: expected"):
        Q.parse_queue(queue)


@pytest.mark.parametrize("name", ["gpu_all.txt", "gpu_endx_vs_dual.txt"])
def test_committed_queues_compose_and_parse(name, tmp_path):
    runs = Q.parse_queue(QUEUES / name)
    seen = set()
    for run in runs:
        words = Q.expand(run.words, tmp_path, run.folder)
        if run.is_command:
            args = build_parser().parse_args(words[1:])
            assert callable(args.func)
            if words[1] == "export":
                compose(args.overrides)
            continue
        cfg = compose(words)
        assert cfg.profile == "gpu" and "GPU profile" in cfg.description, words
        seen.add(cfg.experiment)
    if name == "gpu_all.txt":                   # every experiment, once at least
        experiments = {p.stem for p in (Path(Q.__file__).parents[1] / "conf/experiment")
                       .glob("*.yaml")}
        # but the distillations (distill, distill_plus): they need their teacher's scores
        # first (experiments/distill_teacher.py), which no queue line can make; the device
        # checklist's smoke items make them. Nor the CPU recipes whose gpu profile is another
        # experiment's (distill_hour: distill's)
        teacher = {e for e in experiments - set(SAME_GPU_PROFILE)
                   if "teacher" in compose([f"experiment={e}", "profile=gpu"]).data}
        assert teacher == {"distill", "distill_plus"}
        assert seen == experiments - teacher - set(SAME_GPU_PROFILE)


@pytest.mark.parametrize("damaged", ["m/retriever.done", "m/dual_gru/paper-seed42/result.json"])
@pytest.mark.parametrize("how", ["truncated", "empty", "garbage"])
def test_damaged_queue_state_is_refused_naming_the_file(tmp_path, monkeypatch, damaged, how):
    from retrieval_qa.errors import InputFileError

    queue = tmp_path / "q.txt"
    queue.write_text("m/retriever  rqa export experiment=mining_dual --output {out}\n"
                     "m  experiment=dual_gru\n")
    root = tmp_path / "runs"
    monkeypatch.setattr(R, "popen", _fake_rqa([]))
    Q.main([str(queue), "--output-root", str(root)])
    path = root / damaged
    data = path.read_bytes()
    path.write_bytes({"truncated": data[:len(data) // 2], "empty": b"",
                      "garbage": bytes(range(256)) * 4}[how])
    calls = []
    monkeypatch.setattr(R, "popen", _fake_rqa(calls))
    with pytest.raises(InputFileError) as e:
        Q.main([str(queue), "--output-root", str(root)])
    assert str(path) in str(e.value) and "damaged" in str(e.value) and "delete" in str(e.value)
    assert calls == []  # nothing run, nothing marked: the state stays as it was found


def test_the_script_exits_2_on_damaged_state(tmp_path):
    import sys

    queue = tmp_path / "q.txt"
    queue.write_text("m/retriever  rqa export experiment=mining_dual --output {out}\n")
    (tmp_path / "runs" / "m").mkdir(parents=True)
    (tmp_path / "runs" / "m" / "retriever.done").write_text('{"comm')
    done = subprocess.run([sys.executable, Q.__file__, str(queue), "--output-root",
                           str(tmp_path / "runs")], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "retriever.done" in done.stderr and "damaged" in done.stderr


def test_through_a_section_and_train_overrides(tmp_path, monkeypatch):
    queue = tmp_path / "q.txt"
    queue.write_text("# --- first pass: one seed ---\na experiment=fcrr seed=1\n"
                     "a/x  rqa export experiment=sde --output {out}\n"
                     "# --- seed 2 ---\na experiment=fcrr seed=2\n")
    runs = Q.parse_queue(queue)
    assert [r.section for r in runs] == ["first pass: one seed"] * 2 + ["seed 2"]
    assert Q.through(runs, "FIRST PASS") == runs[:2] and Q.through(runs, None) == runs
    with pytest.raises(ValueError, match="no section title holds 'seed 9'"):
        Q.through(runs, "seed 9")
    calls = []
    monkeypatch.setattr(R, "popen", _fake_rqa(calls))
    Q.main([str(queue), "--output-root", str(tmp_path / "r"), "--through", "first pass",
            "--train-overrides", "trainer.max_steps=2 threads=1"])
    assert [c[0] for c in calls] == ["train", "export"]
    assert calls[0][-3:-1] == ["trainer.max_steps=2", "threads=1"]
    assert "trainer.max_steps=2" not in calls[1]           # rqa commands take none


def test_caps_go_to_the_lines_whose_data_config_has_the_key(tmp_path, monkeypatch):
    queue = tmp_path / "q.txt"
    queue.write_text("a experiment=fcrr profile=gpu\nb experiment=dual_gru profile=gpu\n")
    calls = []
    monkeypatch.setattr(R, "popen", _fake_rqa(calls))
    Q.main([str(queue), "--output-root", str(tmp_path / "r"),
            "--caps", "data.val_questions=10 data.max_val_questions=10"])
    assert "data.val_questions=10" in calls[0] and "data.max_val_questions=10" not in calls[0]
    assert "data.max_val_questions=10" in calls[1] and "data.val_questions=10" not in calls[1]


def test_sigterm_goes_on_to_the_running_command_and_no_run_follows(tmp_path, monkeypatch):
    import signal
    import sys
    import threading

    stopped, ready = tmp_path / "stopped", tmp_path / "ready"
    child = [sys.executable, "-c",
             "import signal, sys, time, pathlib\n"
             f"def stop(*_): pathlib.Path({str(stopped)!r}).write_text('ckpt'); sys.exit(0)\n"
             f"signal.signal(signal.SIGTERM, stop)\npathlib.Path({str(ready)!r}).touch()\n"
             "time.sleep(30)\n"]
    started = []

    def popen(cmd, **kwargs):                   # every line runs the child instead
        started.append(cmd)
        return subprocess.Popen(child, **kwargs)

    def terminate():
        for _ in range(400):
            if ready.exists():
                break
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    queue = tmp_path / "q.txt"
    queue.write_text("a  rqa export experiment=sde --output {out}\n"
                     "b  rqa export experiment=ade --output {out}\n")
    monkeypatch.setattr(R, "popen", popen)
    thread = threading.Thread(target=terminate)
    thread.start()
    summary = Q.main([str(queue), "--output-root", str(tmp_path / "r")])
    thread.join(20)
    assert stopped.read_text() == "ckpt" and len(started) == 1
    assert [s["state"] for s in summary] == ["left", "left"]
    assert not (tmp_path / "r" / "a.done").exists()    # stopped: not marked done
    assert signal.getsignal(signal.SIGTERM) is not None  # the handler put back


def test_experiments_lines_are_made_from_conf(tmp_path, monkeypatch):
    from retrieval_qa.sweeps import queue as queue_mod

    monkeypatch.setattr(queue_mod, "with_profile", lambda profile: ["ade", "dual_gru",
                                                                     "dual_vae", "distill"])
    queue = tmp_path / "q.txt"
    queue.write_text("@folder vaes *_vae\n@folder dual dual_*\n"
                     "# --- first ---\ndual experiment=dual_gru profile=gpu seed=1\n"
                     "@experiments profile=gpu seed=1\n"
                     "# --- seed 2 ---\n@experiments profile=gpu seed=2 except=ade\n")
    runs = Q.parse_queue(queue)
    assert [(r.folder, r.words[0], r.section) for r in runs] == [
        ("dual", "experiment=dual_gru", "first"), ("ade", "experiment=ade", "first"),
        ("vaes", "experiment=dual_vae", "first"),        # distill needs its teacher's scores
        ("dual", "experiment=dual_gru", "seed 2"), ("vaes", "experiment=dual_vae", "seed 2")]
    assert runs[1].words == ["experiment=ade", "profile=gpu", "seed=1"]
    queue.write_text("@each profile=gpu\n")
    with pytest.raises(ValueError, match=r"q.txt:1: expected '@folder"):
        Q.parse_queue(queue)
