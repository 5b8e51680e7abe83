"""Run a queue of `rqa` runs one after another, resumable, with a deadline.

Each line of the queue file is one run (``#`` starts a comment), in one of two forms:

- ``FOLDER experiment=NAME [key=value ...]``: ``rqa train`` with these overrides into
  ``OUTPUT_ROOT/FOLDER``; reused when its run folder holds a finished run of these settings
  (``result.json``, and ``config.yaml`` equal to the composed config: ``rqa train``'s own
  check, retrieval_qa/training/run_folder.py); a run with a checkpoint resumes (``rqa train``
  does that itself); a run folder of other settings is refused (reported, not run).
- ``FOLDER rqa SUBCOMMAND [args ...]``: any other ``rqa`` command (``export``, ``mine``, ...);
  reused when ``OUTPUT_ROOT/FOLDER.done`` exists and records this command (it is written
  when the command exits 0); a marker of another command is refused. Its log is
  ``OUTPUT_ROOT/FOLDER.log``.

In the words after FOLDER, ``{root}`` stands for OUTPUT_ROOT and ``{out}`` for
OUTPUT_ROOT/FOLDER (e.g. ``--output {out}``, ``data.dense_retriever={root}/mining/retriever``).
A comment line ``# --- TITLE ---`` starts a section; ``--through TEXT`` runs the lines up to
the end of the first section whose title holds TEXT (e.g. ``--through "first pass"``).
``--train-overrides "key=value ..."`` adds settings to every training line (a rehearsal's
tiny step counts); ``--caps "data.KEY=N ..."`` adds each cap to the training lines whose data
config has that key (pool caps differ by data module; a rehearsal on tiny pools). No run is
started once the deadline has passed (nor after a SIGTERM, which goes on to the running
command: `rqa train` writes its last checkpoint and stops), so a queue longer than one sitting goes on at
the next call; a run that fails is reported and the queue goes on. One progress line per run
on stderr (done / running / left, elapsed), a JSON summary as the last stdout line. A
``.done`` marker or ``result.json`` that is damaged (empty, truncated, not JSON) stops the
queue with exit status 2, naming the file and the fix.

    python experiments/run_queue.py QUEUE --output-root runs/gpu [--deadline-s 540]
        [--through TITLE] [--train-overrides "key=value ..."] [--caps "data.KEY=N ..."]
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from retrieval_qa.errors import InputFileError, UsageError
from retrieval_qa.training import run_folder
from retrieval_qa.training.compose import compose
from retrieval_qa.written import read_json_or_refuse, write_text


@dataclass(frozen=True)
class Run:
    folder: str
    words: list[str]          # rqa train overrides, or ["rqa", SUBCOMMAND, ...]
    section: str = ""         # the title of the `# --- TITLE ---` comment above it

    @property
    def is_command(self) -> bool:
        return self.words[0] == "rqa"


def parse_queue(path: Path) -> list[Run]:
    runs, section = [], ""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("# ---"):
            section = line.strip("#- \t")
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if len(words) >= 3 and words[1] == "rqa":
            runs.append(Run(words[0], words[1:], section))
            continue
        if len(words) < 2 or not any(w.startswith("experiment=") for w in words[1:]):
            raise ValueError(f"{path}:{number}: expected 'FOLDER experiment=NAME [key=value ...]'"
                             " or 'FOLDER rqa SUBCOMMAND [args ...]'")
        runs.append(Run(words[0], words[1:], section))
    return runs


def through(runs: list[Run], text: str | None) -> list[Run]:
    """The runs up to the end of the first section whose title holds ``text`` (all: None)."""
    if text is None:
        return runs
    titles = list(dict.fromkeys(r.section for r in runs))
    match = next((i for i, t in enumerate(titles) if text.lower() in t.lower()), None)
    if match is None:
        raise ValueError(f"no section title holds {text!r}; sections: {titles}")
    return [r for r in runs if titles.index(r.section) <= match]


def expand(words: list[str], root: Path, folder: str) -> list[str]:
    return [w.replace("{out}", str(root / folder)).replace("{root}", str(root)) for w in words]


def present(words: list[str], caps: list[str]) -> list[str]:
    """The ``data.KEY=N`` of ``caps`` whose key the data config of ``words`` has."""
    if not caps:
        return []
    data = compose(words).data
    return [c for c in caps if c.split("=", 1)[0].removeprefix("data.") in data]


def plan(run: Run, root: Path, train_overrides: list[str] = (), caps: list[str] = ()
         ) -> tuple[list[str], Path, Path, Path | None, object]:
    """(command, what it is called in the output, its log, the marker written on success
    or None when the command leaves its own: result.json, and the composed config of a
    training line, None for a command line)."""
    words = expand(run.words, root, run.folder)
    if run.is_command:
        where = root / run.folder
        marker = where.parent / f"{where.name}.done"
        return ([sys.executable, "-m", "retrieval_qa.cli", *words[1:]], where,
                where.parent / f"{where.name}.log", marker, None)
    overrides = [*words, *train_overrides, *present(words, list(caps)),
                 f"output_dir={root / run.folder}"]
    cfg = compose(overrides)
    where = run_folder.run_dir(cfg)
    return ([sys.executable, "-m", "retrieval_qa.cli", "train", *overrides], where,
            where.parent / f"{where.name}.log", None, cfg)


def reusable(run: Run, where: Path, marker: Path | None, cfg, command: list[str]) -> bool:
    """Whether the run is finished under this line's settings (the marker of this command,
    or a finished run of the composed config); another command's marker or a run of other
    settings raises a UsageError naming it and the fix, a damaged marker is refused."""
    if marker is None:
        return run_folder.finished(cfg, where, "delete that run folder to train it under this "
                                               "line's settings, or give the line another FOLDER")
    if not marker.is_file():
        return False
    fix = f"delete {marker} to run this line's command, or give the line another FOLDER"
    done = read_json_or_refuse(marker, "queue marker", fix, required=("command",))
    # the line as written ({root}, {out} unexpanded), else (older markers) the command run
    old, new = (done.get("words"), run.words) if "words" in done else \
        (done.get("command"), command[3:])
    if old != new:
        raise UsageError(f"{marker} records another command ({' '.join(map(str, old or []))}) "
                         f"than this line's ({' '.join(new)}) (fix: {fix})")
    return True


def is_done(where: Path, marker: Path | None) -> bool:
    """The run finished (its marker, or a training's ``result.json``, is there and reads
    back; a damaged one is refused). Whether it finished under this line's settings is
    :func:`reusable`'s question."""
    done = where / run_folder.RESULT if marker is None else marker
    if not done.is_file():
        return False
    read_json_or_refuse(done, "queue marker" if marker else "run report",
                        f"delete {done}: the queue runs that line again")
    return True


_running: list[subprocess.Popen] = []
_stopped: list[int] = []


def _forward(signum, frame) -> None:
    """SIGTERM: to the running command (not to its workers: the command stops them), and
    no further run."""
    _stopped.append(signum)
    for proc in _running:
        proc.send_signal(signum)


def call(cmd: list[str], log) -> tuple[int, str]:
    """Run one command, its stderr into ``log``: (exit status, stdout)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
    _running.append(proc)
    try:
        out, _ = proc.communicate()
    finally:
        _running.remove(proc)
    return proc.returncode, out


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("queue", type=Path)
    parser.add_argument("--output-root", type=Path, required=True)
    parser.add_argument("--deadline-s", type=float, default=float("inf"),
                        help="start no run after this many seconds")
    parser.add_argument("--through", default=None, metavar="TITLE",
                        help="only the lines up to the end of the section whose title holds it")
    parser.add_argument("--train-overrides", default="", metavar="'KEY=VALUE ...'",
                        help="settings added to every training line")
    parser.add_argument("--caps", default="", metavar="'data.KEY=N ...'",
                        help="caps added to the training lines whose data config has the key")
    args = parser.parse_args(argv)
    runs = through(parse_queue(args.queue), args.through)
    extra, caps = shlex.split(args.train_overrides), shlex.split(args.caps)
    start = time.monotonic()
    summary = []
    _stopped.clear()
    previous = signal.signal(signal.SIGTERM, _forward)
    try:
        summary = _run_all(runs, args, extra, caps, start)
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(json.dumps({"runs": summary, "seconds": round(time.monotonic() - start, 1)}))
    return summary


def _run_all(runs: list[Run], args, extra: list[str], caps: list[str], start: float
             ) -> list[dict]:
    summary = []
    for i, run in enumerate(runs):
        elapsed = time.monotonic() - start
        state = f"[{i + 1}/{len(runs)} {elapsed:6.0f}s]"
        try:
            cmd, where, log_path, marker, cfg = plan(run, args.output_root, extra, caps)
            done = reusable(run, where, marker, cfg, cmd)
        except InputFileError:  # damaged queue state: stop, naming the file (exit status 2)
            raise
        except (UsageError, ValueError, KeyError, FileNotFoundError) as e:
            print(f"{state} refused  {run.folder}: {e}", file=sys.stderr, flush=True)
            summary.append({"run": run.folder, "state": "refused", "error": str(e)})
            continue
        if done:
            print(f"{state} reused   {where}", file=sys.stderr, flush=True)
            summary.append({"run": str(where), "state": "reused"})
            continue
        if elapsed > args.deadline_s or _stopped:
            print(f"{state} left     {where} ({'stopped' if _stopped else 'deadline'})",
                  file=sys.stderr, flush=True)
            summary.append({"run": str(where), "state": "left"})
            continue
        print(f"{state} running  {where}", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "a") as log:
            code, out = call(cmd, log)
            if run.is_command:
                log.write(out)              # rqa commands print their JSON summary last
        seconds = round(time.monotonic() - t0, 1)
        # a training is done when it wrote result.json (stopped by a signal, it did not)
        done = code == 0 and ((where / run_folder.RESULT).is_file() if marker is None
                              else not _stopped)
        if done and marker is not None:
            write_text(marker, json.dumps({"command": cmd[3:], "words": run.words,
                                           "seconds": seconds}) + "\n")
        summary.append({"run": str(where), "seconds": seconds, "state": "finished" if done else
                        "left" if _stopped else f"failed ({code})"})
        print(f"{state} {summary[-1]['state']} {where} in {seconds}s",
              file=sys.stderr, flush=True)
    return summary


if __name__ == "__main__":
    try:
        main()
    except UsageError as e:
        print(f"run_queue: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
