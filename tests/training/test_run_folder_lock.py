"""One writer per run folder (issue 76): a second `rqa train` into the folder of a run in
progress is refused with one line naming the folder, the holder's pid and the fix, and the
first run's report holds its own model; a lock left by a dead process is taken over; a
command refused before it wrote anything leaves no folder behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import tiny, tiny_overrides

from retrieval_qa.cli import main
from retrieval_qa.training import run_folder
from retrieval_qa.training.run import train
from retrieval_qa.training.writer_lock import LOCK, RunFolderInUse, WriterLock

REPO = Path(__file__).resolve().parents[2]
RUN = ("test_after_fit=false", "trainer.max_epochs=1", "threads=1")
RUN_DIR = Path("dual_gru") / "cpu-seed42"

# an `rqa train` that pauses after step 2 until the file $GO exists ($PAUSED says it waits)
PAUSING = """
import os, sys, time
from pathlib import Path
from retrieval_qa.training.resumable_checkpoints import ResumableCheckpoints
end = ResumableCheckpoints.on_train_batch_end
def on_train_batch_end(self, trainer, *args):
    end(self, trainer, *args)
    if trainer.global_step == 2:
        Path(os.environ["PAUSED"]).write_text(str(os.getpid()))
        while not Path(os.environ["GO"]).exists():
            time.sleep(0.05)
ResumableCheckpoints.on_train_batch_end = on_train_batch_end
from retrieval_qa.cli import main
sys.exit(main(["train", *sys.argv[1:]]))
"""

# holds a folder's lock until its stdin closes
HOLDER = """
import sys
from retrieval_qa.training.writer_lock import WriterLock
with WriterLock(sys.argv[1]):
    print("locked", flush=True)
    sys.stdin.read()
"""


@contextlib.contextmanager
def _process(args: list[str], env: dict | None = None, **kwargs):
    proc = subprocess.Popen(args, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
                            start_new_session=True, **kwargs)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)


def _wait_for(path: Path, proc, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"the first run ended first (exit {proc.returncode})"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def test_a_second_train_into_a_folder_in_use_is_refused_and_the_first_keeps_its_result(
        setup_dirs, tmp_path, capsys):
    """The reported case: two commands into one output_dir. The second (other settings: a
    bigger model) is refused at once, before it reads or writes anything; the first
    finishes, and its report and export are its own model's."""
    paused, go = tmp_path / "paused", tmp_path / "go"
    first = tiny_overrides(setup_dirs, tmp_path / "out", *RUN)
    with open(tmp_path / "first.log", "w") as log, _process(
            [sys.executable, "-c", PAUSING, *first], env={"PAUSED": str(paused), "GO": str(go)},
            stdout=subprocess.PIPE, stderr=log, text=True) as proc:
        _wait_for(paused, proc)
        second = tiny_overrides(setup_dirs, tmp_path / "out", *RUN,
                                "model.towers.encoder.hidden_size=24")
        assert main(["train", *second]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        folder = tmp_path / "out" / RUN_DIR
        assert len(err) == 1 and err[0].startswith(f"rqa: error: run folder {folder} is in use "
                                                   f"by another rqa train (pid {proc.pid})")
        assert "output_dir=DIR" in err[0] and "wait for that run to end" in err[0]
        go.touch()
        out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, (tmp_path / "first.log").read_text()[-3000:]
    report = json.loads(out.strip().splitlines()[-1])
    saved = json.loads((folder / "result.json").read_text())
    assert saved["global_steps"] == report["global_steps"] > 2
    assert saved["trainable_parameters"] == report["trainable_parameters"]
    # the first run's own settings (hidden 16), not the refused one's
    assert "hidden_size: 16" in (folder / "config.yaml").read_text()


def test_the_lock_names_its_holder_and_is_released_when_the_holder_dies(tmp_path):
    folder = tmp_path / "run"
    with _process([sys.executable, "-c", HOLDER, str(folder)], stdin=subprocess.PIPE,
                  stdout=subprocess.PIPE, text=True) as holder:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunFolderInUse, match=f"in use by another rqa train "
                                                 f"\\(pid {holder.pid}\\)"):
            with WriterLock(folder):
                pass
        os.killpg(holder.pid, signal.SIGKILL)  # a hard kill: no clean-up of its own
        holder.wait(timeout=60)
    assert (folder / LOCK).read_text().strip() == str(holder.pid)  # the stale lock file
    with WriterLock(folder):  # taken over
        assert (folder / LOCK).read_text().strip() == str(os.getpid())


def test_a_stale_lock_file_does_not_stop_a_run(setup_dirs, tmp_path):
    folder = tmp_path / RUN_DIR
    folder.mkdir(parents=True)
    (folder / LOCK).write_text("999999999\n")  # a pid no process has: its run died
    report = train(tiny(setup_dirs, tmp_path, *RUN))
    assert report["global_steps"] > 0 and (folder / "result.json").is_file()
    assert run_folder._leftovers(folder) and LOCK not in [p.name for p in
                                                          run_folder._leftovers(folder)]


def test_a_command_refused_before_it_wrote_anything_leaves_no_folder(setup_dirs, tmp_path):
    """The lock creates the run folder; a setting refused when the method is built (a token
    table's size other than its tokenizer's) leaves no folder, as before the lock."""
    with pytest.raises(ValueError, match="vocab_size"):
        train(tiny(setup_dirs, tmp_path / "out", *RUN, "model.towers.encoder.vocab_size=3"))
    assert not (tmp_path / "out").exists()
