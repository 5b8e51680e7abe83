"""The one runner of planned steps. ``rqa sweep`` (:mod:`.run`), a queue file (:mod:`.queue`,
``experiments/run_queue.py``) and the device checklist (``experiments/device_check.py``) are
planners: each makes a list of :class:`Step` and hands it to :func:`run_steps`, which

* skips a step that is finished already (:meth:`Step.done`: its result is there under its
  settings; finished state of other settings raises :class:`Refused`: reported, not run);
* starts the others in order, one at a time, or up to ``jobs`` :attr:`Step.parallel` ones at
  once, each a :class:`Job`: a :class:`Process` (subprocesses) or a :class:`Call` (a function);
* obeys a deadline (a turn's end): a step starts only if its :attr:`Step.estimate_s` fits
  before it, one waiting for another (:meth:`Step.ready`) is passed over, and with ``grace``
  the running ones get SIGTERM, then SIGKILL (``rqa train`` saves its checkpoint and resumes);
* passes ``forward``'s signals on to the running steps; none starts after one (or a stopped step);
* makes one :class:`Record` per step (its state, seconds, exit status), which the step writes
  where its planner keeps them (:meth:`Step.end`, :meth:`Step.passed`): the sweep's
  ``summary.json``, the queue's markers and summary line, the checklist's ``ID.json``.

An interrupted step resumes when run again: ``rqa train`` from its checkpoint, ``rqa mine`` from
its finished shards, a checklist item restores its carry sets, a queue item its finished runs."""

from __future__ import annotations

import contextlib
import math
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

#: exit statuses of a command stopped by SIGINT / SIGTERM (128 + the signal)
STOPPED_CODES = (128 + signal.SIGINT, 128 + signal.SIGTERM)
#: how a subprocess is started (tests put a stand-in here)
popen = subprocess.Popen


class Refused(Exception):
    """A step that cannot run as planned (its finished state is of other settings, its line
    does not compose): reported with this message, not run."""


@dataclass
class Record:
    """What became of one step.

    Attributes:
        step: the step's name.
        state: ``reused`` (finished before), ``refused``, ``left`` (not started), ``waiting``,
            ``finished``, ``failed`` or ``stopped`` (by a signal or the deadline; it resumes).
        seconds: how long it ran; None: it did not start.
        code: its exit status (its failed command's; 0: none failed); None: not started.
        reason: a refusal's message, what it waits for, or why it was left: ``deadline``,
            ``stopped`` (by a signal) or ``cut`` (pending when the running steps were cut).
    """

    step: str
    state: str
    seconds: float | None = None
    code: int | None = None
    reason: str | None = None


class Step:
    """One planned step; a planner subclasses it. Only :meth:`start` is required."""

    name: str = ""
    estimate_s: float = 0.0      # starts only when this many seconds fit before the deadline
    parallel: bool = False       # may run beside other parallel steps (up to ``jobs``)

    def done(self) -> bool:
        """Finished already under its settings (raise :class:`Refused` to report a clash)."""
        return False

    def ready(self) -> str | None:
        """None, or what it waits for (another step's record or output)."""
        return None

    def start(self) -> Job:
        raise NotImplementedError

    def end(self, job: Job, record: Record) -> str | None:
        """Write the step's record; return its state when it is not ``record.state``
        (``finished`` / ``failed`` / ``stopped``)."""
        return None

    def passed(self, record: Record) -> None:
        """The step did not start (reused, refused, left, waiting): note it."""


@dataclass
class Action:
    """One command of a :class:`Process`: a subprocess or a function run here.

    Attributes:
        argv: the subprocess's command line; None: a ``call``.
        call: the function; returning False means it failed and the step stops.
        shown: how the step's commands show it; None: ``argv``, quoted.
        skip_if: a path that, when it exists (an earlier step made it), skips the action.
        always: a call that runs even when the step was stopped (:meth:`Process.finish`).
    """

    argv: list[str] | None = None
    call: Callable[[], bool] | None = None
    shown: str | None = None        # how the step's commands show it (default: argv, quoted)
    skip_if: Path | None = None     # made already (a prerequisite of an earlier step): skipped
    always: bool = False            # a call that runs even when the step was stopped

    def text(self) -> str:
        return self.shown if self.shown is not None else shlex.join(self.argv or [])


class Process:
    """A step's actions one after another, each command a subprocess; the first starts here.

    Args:
        actions: the actions, in order.
        cwd: the commands' working folder; None: this process's.
        env: the commands' environment; None: this process's.
        log: the file each command's stderr is appended to; None: this process's stderr.
        stdout: the file of the command numbered N (from 1, counting every action),
            ``"inherit"`` for this process's stdout, or None for none.
        new_session: each command in its own session, so that SIGKILL ends its workers too.
        note: given each line for the log (a command started, an action skipped).
    """

    def __init__(self, actions: Iterable[Action], *, cwd: Path | None = None,
                 env: dict | None = None, log: Path | None = None,
                 stdout: Callable[[int], Path] | str | None = None, new_session: bool = True,
                 note: Callable[[str], None] | None = None) -> None:
        self.actions = list(actions)
        self.cwd, self.env, self.log, self.stdout_of = cwd, env, log, stdout
        self.new_session, self.note = new_session, note or (lambda text: None)
        self.commands: list[str] = []     # what ran, in order
        self.outputs: list[Path] = []     # each subprocess's stdout file
        self.proc: subprocess.Popen | None = None
        self._stdout: IO | None = None
        self.start = time.monotonic()
        self.code: int | None = 0         # the failed command's exit status (0: none failed)
        self.halt = self.stopped = False  # halt: start no further action; stopped: cut
        self._next()

    def _call(self, action: Action) -> bool:
        self.commands.append(action.text())
        if action.call():
            return True
        self.code = 1
        return False

    def _next(self) -> None:
        self.proc = None
        while self.actions:
            if self.halt:
                self.stopped = True
                return
            action = self.actions.pop(0)
            if action.skip_if is not None and action.skip_if.exists():
                self.note(f"skipped (made earlier: {action.skip_if}): {action.text()}")
                continue
            if action.call is not None:
                if not self._call(action):
                    self.actions = []
                continue
            self.commands.append(action.text())
            self.note(f"running: {self.commands[-1]}")
            if callable(self.stdout_of):
                path = self.stdout_of(len(self.commands))
                self.outputs.append(path)
                self._stdout = open(path, "w+")
            out = self._stdout or (None if self.stdout_of == "inherit" else subprocess.DEVNULL)
            with open(self.log, "a") if self.log is not None else contextlib.nullcontext() \
                    as log:
                self.proc = popen(action.argv, cwd=self.cwd, env=self.env, stdout=out,
                                  stderr=log, start_new_session=self.new_session)
            return

    def poll(self) -> bool:
        """True once every action is done (or one failed, or the step was stopped)."""
        if self.proc is None:
            return True
        code = self.proc.poll()
        if code is None:
            return False
        self.flush()
        if code != 0 or self.stopped:
            self.code, self.proc = code, None
            return True
        self.code = 0
        self._next()
        return self.proc is None

    def stop(self, sig: int) -> None:
        """``sig`` to the running command's own process (SIGTERM: `rqa train` stops its
        loader workers itself, writing its checkpoint); SIGKILL to its whole session. No
        further action starts."""
        self.halt = True
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.stopped = True
        try:
            if sig == signal.SIGKILL:
                if self.new_session:
                    os.killpg(self.proc.pid, sig)
                else:
                    self.proc.kill()
            elif self.proc.poll() is None:
                self.proc.send_signal(sig)
        except ProcessLookupError:
            pass

    def wait(self) -> None:
        if self.proc is not None:
            self.code = self.proc.wait()

    def flush(self) -> None:
        if self._stdout is not None:
            self._stdout.flush()

    def finish(self) -> None:
        """The ``always`` actions left by a stop (a cut training's carry set)."""
        if self.stopped:
            for action in [a for a in self.actions if a.always and a.call is not None]:
                self._call(action)

    @property
    def seconds(self) -> float:
        return round(time.monotonic() - self.start, 1)


class Call:
    """A function run here, to its end, when the step starts (``rqa train`` in this process).

    Args:
        fn: the function; it returns the exit status (130 / 143: stopped by a signal).
    """

    def __init__(self, fn: Callable[[], int]) -> None:
        self.start = time.monotonic()
        self.code: int | None = fn()
        self.stopped = self.code in STOPPED_CODES
        self.commands: list[str] = []

    def poll(self) -> bool:
        return True

    def stop(self, sig: int) -> None:
        """Nothing to do: the function has returned (a signal during it is its own)."""

    def wait(self) -> None:
        pass

    def finish(self) -> None:
        pass

    @property
    def seconds(self) -> float:
        return round(time.monotonic() - self.start, 1)


Job = Process | Call


@dataclass
class Report:
    """What :func:`run_steps` did.

    Attributes:
        records: one :class:`Record` per step, in the order each was settled.
        signal: the first signal forwarded (or that stopped a call); None: none.
        cut: the running steps were stopped at the deadline.
    """

    records: list[Record] = field(default_factory=list)
    signal: int | None = None      # the first signal forwarded (or that stopped a call)
    cut: bool = False              # the running steps were stopped at the deadline

    def states(self) -> dict[str, str]:
        return {r.step: r.state for r in self.records}


@contextlib.contextmanager
def _forwarding(signals: tuple[int, ...], running: list, received: list[int]):
    """While running: each of ``signals`` is noted and passed on to the running jobs (only
    the main thread can set handlers; elsewhere nothing is forwarded)."""
    if not signals or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        received.append(signum)
        for _, job in running:
            job.stop(signum)

    old = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def run_steps(steps: Iterable[Step], *, deadline_at: float = math.inf,
              grace: float | None = None, jobs: int = 1, forward: tuple[int, ...] = (),
              poll_s: float = 0.2) -> Report:
    """Run ``steps`` (see the module docstring).

    Args:
        steps: the planned steps, in order.
        deadline_at: a ``time.monotonic()`` time after which no step starts; inf: none.
        grace: SIGTERM to the running steps this many seconds before the deadline (SIGKILL by
            it), and a step starts only if it fits before that; None: no step is stopped.
        jobs: how many :attr:`Step.parallel` steps may run at once.
        forward: the signals passed on to the running steps (none starts after one).
        poll_s: the seconds between polls of the running steps.
    """
    report = Report()
    pending = list(steps)
    running: list[tuple[Step, Job]] = []
    received: list[int] = []
    halted = False

    def left() -> float:
        return deadline_at - time.monotonic()

    def settle(step: Step, state: str, reason: str | None = None) -> None:
        record = Record(step.name, state, reason=reason)
        report.records.append(record)
        step.passed(record)

    def ended(step: Step, job: Job) -> None:
        nonlocal halted
        job.finish()
        state = "stopped" if job.stopped else "finished" if job.code == 0 else "failed"
        record = Record(step.name, state, job.seconds, job.code)
        record.state = step.end(job, record) or state
        report.records.append(record)
        if record.state == "stopped":
            halted = True
            if isinstance(job, Call) and report.signal is None and job.code in STOPPED_CODES:
                report.signal = job.code - 128

    def fits(step: Step) -> bool:
        room = left() - (grace or 0.0)
        return step.estimate_s <= room and room > 0

    with _forwarding(tuple(forward), running, received):
        while pending or running:
            if running and grace is not None and left() <= grace:   # the deadline: stop all
                for _, job in running:
                    job.stop(signal.SIGTERM)    # rqa train writes last.ckpt and exits
                while not all(job.poll() for _, job in running) and left() > 0.5:
                    time.sleep(poll_s)
                for step, job in running:
                    job.stop(signal.SIGKILL)
                    job.wait()
                    ended(step, job)
                report.cut = True
                for step in pending:
                    settle(step, "left", "cut")
                break
            while pending:
                if running and len(running) >= jobs:
                    break
                step = pending[0]
                try:
                    if step.done():
                        pending.pop(0)
                        settle(step, "reused")
                        continue
                except Refused as e:
                    pending.pop(0)
                    settle(step, "refused", str(e))
                    continue
                if running and not (step.parallel and all(s.parallel for s, _ in running)):
                    break
                pending.pop(0)
                if received or halted:
                    settle(step, "left", "stopped")
                    continue
                if not fits(step):
                    settle(step, "left", "deadline")
                    continue
                waits = step.ready()
                if waits is not None:
                    settle(step, "waiting", waits)
                    continue
                running.append((step, step.start()))
            for item in [r for r in running if r[1].poll()]:
                running.remove(item)
                ended(*item)
            if running:
                time.sleep(poll_s)
    if received and report.signal is None:
        report.signal = received[0]
    return report
