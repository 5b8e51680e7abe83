"""A queue file of `rqa` runs, planned into steps of :mod:`.runner` (resumable, with a
deadline); ``experiments/run_queue.py`` is its command line.

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

Lines made from conf/ (:func:`expand_experiments`): ``@experiments key=value ...
[except=A,B]`` stands for ``FOLDER experiment=NAME key=value ...`` for every experiment with
a gpu profile of its own (less the variants that share another's) that runs alone (its data
needs nothing a chain makes: mined pairs, a teacher, an exported retriever: those stay
hand-written), has no earlier line of the same ``seed`` and is not excepted, in conf's
order; so a new method joins the queue with no edit. Its FOLDER is the first
``@folder FOLDER PATTERN ...`` whose shell pattern matches the name, else the name.

In the words after FOLDER, ``{root}`` stands for OUTPUT_ROOT and ``{out}`` for
OUTPUT_ROOT/FOLDER (e.g. ``--output {out}``, ``data.dense_retriever={root}/mining/retriever``).
A comment line ``# --- TITLE ---`` starts a section; ``--through TEXT`` runs the lines up to
the end of the first section whose title holds TEXT (e.g. ``--through "first pass"``).
``--train-overrides "key=value ..."`` adds settings to every training line (a rehearsal's
tiny step counts); ``--caps "data.KEY=N ..."`` adds each cap to the training lines whose data
config has that key (pool caps differ by data module; a rehearsal on tiny pools). No run is
started once the deadline has passed (nor after a SIGTERM, which goes on to the running
command: `rqa train` writes its last checkpoint and stops), so a queue longer than one
sitting goes on at the next call; a run that fails is reported and the queue goes on. One
progress line per run on stderr (done / running / left, elapsed), a JSON summary as the last
stdout line. A ``.done`` marker or ``result.json`` that is damaged (empty, truncated, not
JSON) stops the queue with exit status 2, naming the file and the fix.

    python experiments/run_queue.py QUEUE --output-root runs/gpu [--deadline-s 540]
        [--through TITLE] [--train-overrides "key=value ..."] [--caps "data.KEY=N ..."]
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import shlex
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputFileError, UsageError
from ..training import run_folder
from ..training.compose import compose
from ..written import read_json_or_refuse, write_text
from . import runner
from .experiments import standalone, with_profile


@dataclass(frozen=True)
class Run:
    """One line of the queue.

    Attributes:
        folder: its FOLDER, under the output root.
        words: a training line's ``rqa train`` overrides, or ``["rqa", SUBCOMMAND, ...]``;
            ``{root}`` and ``{out}`` not filled in yet (:func:`expand`).
        section: the title of the ``# --- TITLE ---`` comment above it; "": none.
    """

    folder: str
    words: list[str]          # rqa train overrides, or ["rqa", SUBCOMMAND, ...]
    section: str = ""         # the title of the `# --- TITLE ---` comment above it

    @property
    def is_command(self) -> bool:
        return self.words[0] == "rqa"


def _seed(words: list[str]) -> str | None:
    return next((w.split("=", 1)[1] for w in words if w.startswith("seed=")), None)


def expand_experiments(words: list[str], folders: list[tuple[str, list[str]]],
                       earlier: list[Run], section: str) -> list[Run]:
    """The lines of ``@experiments WORDS`` (see the module docstring).

    Args:
        words: the words after ``@experiments``: ``key=value`` overrides (``profile=`` picks
            the profile, default ``gpu``) and ``except=A,B``.
        folders: the ``@folder`` lines above it, ``(FOLDER, [PATTERN, ...])``; the first
            match names an experiment's FOLDER.
        earlier: the runs of the lines above it (an experiment there with the same ``seed``
            is left out).
        section: the title of its section.
    """
    excepted = {n for w in words if w.startswith("except=") for n in w[7:].split(",") if n}
    words = [w for w in words if not w.startswith("except=")]
    profile = next((w.split("=", 1)[1] for w in words if w.startswith("profile=")), "gpu")
    seed = _seed(words)
    ran = {(w[11:], _seed(r.words)) for r in earlier if not r.is_command
           for w in r.words if w.startswith("experiment=")}
    runs = []
    for name in with_profile(profile):
        if name in excepted or (name, seed) in ran or not standalone(name, profile):
            continue
        folder = next((f for f, patterns in folders
                       if any(fnmatch.fnmatchcase(name, p) for p in patterns)), name)
        runs.append(Run(folder, [f"experiment={name}", *words], section))
    return runs


def parse_queue(path: Path) -> list[Run]:
    """The runs of a queue file (see the module docstring), ``@experiments`` lines expanded;
    a line of neither form is a ValueError naming it.

    Args:
        path: the queue file.
    """
    runs: list[Run] = []
    folders: list[tuple[str, list[str]]] = []
    section = ""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("# ---"):
            section = line.strip("#- \t")
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "@folder" and len(words) >= 3:
            folders.append((words[1], words[2:]))
            continue
        if words[0] == "@experiments":
            runs += expand_experiments(words[1:], folders, runs, section)
            continue
        if words[0].startswith("@"):
            raise ValueError(f"{path}:{number}: expected '@folder FOLDER PATTERN ...' or "
                             "'@experiments key=value ... [except=A,B]'")
        if len(words) >= 3 and words[1] == "rqa":
            runs.append(Run(words[0], words[1:], section))
            continue
        if len(words) < 2 or not any(w.startswith("experiment=") for w in words[1:]):
            raise ValueError(f"{path}:{number}: expected 'FOLDER experiment=NAME [key=value ...]'"
                             " or 'FOLDER rqa SUBCOMMAND [args ...]'")
        runs.append(Run(words[0], words[1:], section))
    return runs


def through(runs: list[Run], text: str | None) -> list[Run]:
    """The runs up to the end of the first section whose title holds ``text``.

    Args:
        runs: the queue's runs, in order.
        text: part of a section title, in any case; None: every run.
    """
    if text is None:
        return runs
    titles = list(dict.fromkeys(r.section for r in runs))
    match = next((i for i, t in enumerate(titles) if text.lower() in t.lower()), None)
    if match is None:
        raise ValueError(f"no section title holds {text!r}; sections: {titles}")
    return [r for r in runs if titles.index(r.section) <= match]


def expand(words: list[str], root: Path, folder: str) -> list[str]:
    """``words`` with ``{out}`` as ``root/folder`` and ``{root}`` as ``root``.

    Args:
        words: a line's words after FOLDER.
        root: the output root (OUTPUT_ROOT).
        folder: the line's FOLDER.
    """
    return [w.replace("{out}", str(root / folder)).replace("{root}", str(root)) for w in words]


def present(words: list[str], caps: list[str]) -> list[str]:
    """The ``data.KEY=N`` of ``caps`` whose key the data config of ``words`` has.

    Args:
        words: a training line's overrides (composed, to read its data config).
        caps: ``data.KEY=N`` settings; empty: none (nothing is composed).
    """
    if not caps:
        return []
    data = compose(words).data
    return [c for c in caps if c.split("=", 1)[0].removeprefix("data.") in data]


def plan(run: Run, root: Path, train_overrides: list[str] = (), caps: list[str] = ()
         ) -> tuple[list[str], Path, Path, Path | None, object]:
    """(command, what it is called in the output, its log, the marker written on success
    or None when the command leaves its own: result.json, and the composed config of a
    training line, None for a command line).

    Args:
        run: the line.
        root: the output root.
        train_overrides: settings added to a training line (``--train-overrides``).
        caps: ``data.KEY=N`` caps, added to a training line whose data config has the key.
    """
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
    settings raises a UsageError naming it and the fix, a damaged marker is refused.

    Args:
        run: the line.
        where: its run folder (a training line) or output path (a command line): :func:`plan`'s.
        marker: a command line's ``.done`` marker; None: a training line.
        cfg: a training line's composed config; None for a command line.
        command: the command :func:`plan` made (an older marker records it less its first
            three words, ``python -m retrieval_qa.cli``).
    """
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
    :func:`reusable`'s question.

    Args:
        where: a training line's run folder (where its ``result.json`` is).
        marker: a command line's ``.done`` marker; None: a training line.
    """
    done = where / run_folder.RESULT if marker is None else marker
    if not done.is_file():
        return False
    read_json_or_refuse(done, "queue marker" if marker else "run report",
                        f"delete {done}: the queue runs that line again")
    return True


class QueueStep(runner.Step):
    """One line of the queue as a step of the runner: planned when reached (so a line
    refused is reported and the queue goes on), its summary entry written when it ends.

    Args:
        run: the line.
        index: its number in the progress lines, from 1.
        total: how many lines the queue runs.
        root: the output root.
        extra: settings added to a training line (``--train-overrides``).
        caps: ``data.KEY=N`` caps, added to a training line whose data config has the key.
        start: the queue's start (``time.monotonic()``), for the elapsed time.
        summary: the queue's summary entries; the step appends its own.
    """

    def __init__(self, run: Run, index: int, total: int, root: Path, extra: list[str],
                 caps: list[str], start: float, summary: list[dict]) -> None:
        self.run, self.index, self.total, self.root = run, index, total, root
        self.extra, self.caps, self.t0, self.summary = extra, caps, start, summary
        self.name = run.folder
        self.where = None

    def _say(self, what: str, text: str) -> None:
        state = f"[{self.index}/{self.total} {time.monotonic() - self.t0:6.0f}s]"
        print(f"{state} {what} {text}", file=sys.stderr, flush=True)

    def done(self) -> bool:
        try:
            self.cmd, self.where, self.log, self.marker, cfg = plan(
                self.run, self.root, self.extra, self.caps)
            return reusable(self.run, self.where, self.marker, cfg, self.cmd)
        except InputFileError:  # damaged queue state: stop, naming the file (exit status 2)
            raise
        except (UsageError, ValueError, KeyError, FileNotFoundError) as e:
            raise runner.Refused(str(e)) from e

    def passed(self, record: runner.Record) -> None:
        if record.state == "refused":
            self._say("refused ", f"{self.run.folder}: {record.reason}")
            self.summary.append({"run": self.run.folder, "state": "refused",
                                 "error": record.reason})
        elif record.state == "reused":
            self._say("reused  ", str(self.where))
            self.summary.append({"run": str(self.where), "state": "reused"})
        else:
            self._say("left    ", f"{self.where} ({record.reason})")
            self.summary.append({"run": str(self.where), "state": "left"})

    def start(self) -> runner.Job:
        self._say("running ", str(self.where))
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._out = Path(tempfile.mkdtemp(prefix="rqa-queue-"))
        return runner.Process([runner.Action(self.cmd)], log=self.log, new_session=False,
                              stdout=lambda n: self._out / f"{n}.out")

    def end(self, job: runner.Process, record: runner.Record) -> str:
        out = "".join(p.read_text() for p in job.outputs if p.is_file())
        for p in job.outputs:
            p.unlink(missing_ok=True)
        self._out.rmdir()
        if self.run.is_command:                # rqa commands print their JSON summary last
            with open(self.log, "a") as log:
                log.write(out)
        code = job.code
        # a training is done when it wrote result.json (stopped by a signal, it did not)
        done = code == 0 and ((self.where / run_folder.RESULT).is_file()
                              if self.marker is None else not job.stopped)
        if done and self.marker is not None:
            write_text(self.marker, json.dumps({"command": self.cmd[3:], "words": self.run.words,
                                                "seconds": record.seconds}) + "\n")
        state = "finished" if done else "left" if job.stopped else f"failed ({code})"
        self.summary.append({"run": str(self.where), "seconds": record.seconds, "state": state})
        self._say(state, f"{self.where} in {record.seconds}s")
        return "finished" if done else "stopped" if job.stopped else "failed"


def run_queue(runs: list[Run], root: Path, *, deadline_s: float = float("inf"),
              extra: list[str] = (), caps: list[str] = ()) -> list[dict]:
    """Run the queue's ``runs`` (see the module docstring); returns the summary entries.

    Args:
        runs: the lines to run, in order.
        root: the output root.
        deadline_s: seconds from now after which no run starts; inf: no deadline.
        extra: settings added to every training line (``--train-overrides``).
        caps: ``data.KEY=N`` caps, added to a training line whose data config has the key.
    """
    start = time.monotonic()
    summary: list[dict] = []
    steps = [QueueStep(run, i + 1, len(runs), root, list(extra), list(caps), start, summary)
             for i, run in enumerate(runs)]
    runner.run_steps(steps, deadline_at=start + deadline_s, forward=(signal.SIGTERM,))
    return summary


def main(argv: list[str] | None = None) -> list[dict]:
    """``experiments/run_queue.py``: run the queue file's lines (``--through``: up to that
    section) and print the JSON summary as the last stdout line; returns the summary entries.

    Args:
        argv: the command-line words after the program; None: ``sys.argv[1:]``.
    """
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
    start = time.monotonic()
    summary = run_queue(runs, args.output_root, deadline_s=args.deadline_s,
                        extra=shlex.split(args.train_overrides), caps=shlex.split(args.caps))
    print(json.dumps({"runs": summary, "seconds": round(time.monotonic() - start, 1)}))
    return summary


def cli(argv: list[str] | None = None) -> None:
    """``main``, a bad input reported in one line with exit status 2.

    Args:
        argv: as :func:`main`'s.
    """
    try:
        main(argv)
    except UsageError as e:
        print(f"run_queue: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
