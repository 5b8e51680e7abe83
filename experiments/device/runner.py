"""Running the checklist: the unfinished items that fit before the deadline, in order, each
step a subprocess of its own (its own process group), SIGTERM to every running item before
the deadline, then SIGKILL; each item's JSON written when it ends (:mod:`.records`)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

from . import carry
from .checklist import MIN_SLICE_S, ROOT, Item
from .commands import Context, Step, carried_dir, resolve, steps_of
from .records import (
    figures,
    finished,
    last_json,
    now_iso,
    queue_records,
    restore_queue,
    tail,
    write_record,
    write_status,
)


def carry_root(ctx: Context) -> Path:
    """Where this machine's items leave their carry sets (they come back from there)."""
    return ctx.work_root / "carry"


def ready(item: Item, ctx: Context) -> str | None:
    """None when every item ``item`` waits for is there (a record: finished and passed; a
    carry set: restored, from this machine's or the carried-in sets), else what is missing."""
    for what, ident in item.needs():
        if what == "record":
            path = ctx.output_root / f"{ident}.json"
            if not path.is_file() or json.loads(path.read_text()).get("status") != "passed":
                return f"waits for {ident}'s passed record"
            continue
        sources = [carry_root(ctx), *([ctx.carry_in] if ctx.carry_in else [])]
        found = carry.find_set(ident, sources)
        into = carried_dir(ctx, ident)
        if found is None:
            if (into / carry.ABOUT_FILE).is_file():
                continue
            return f"waits for {ident}'s carry set"
        manifest = json.loads((found / carry.names(ident)[0]).read_text())
        about = into / carry.ABOUT_FILE
        if not about.is_file() or json.loads(about.read_text()).get("sha256") != \
                manifest["sha256"]:
            carry.restore(found, ident, into)
    return None


def carry_step(argv: list[str], item: Item, ctx: Context) -> dict:
    """``carry PATH [--only A,B]`` or ``carry --weights RUN_FOLDER``: item's carry set."""
    part_bytes = ctx.part_bytes or carry.PART_BYTES
    if argv[1] == "--weights":
        manifest = carry.pack_weights(Path(argv[2]), carry_root(ctx), item.id, part_bytes)
    else:
        only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else None
        manifest = carry.pack_folder(Path(argv[1]), carry_root(ctx), item.id, only, part_bytes)
    data = json.loads(manifest.read_text())
    return {k: data.get(k) for k in ("kind", "source", "global_step", "finished", "bytes",
                                     "part_bytes", "sha256")} | {"parts": len(data["parts"])}


class Runner:
    """One item's steps, one subprocess at a time (its own process group)."""

    def __init__(self, item: Item, ctx: Context, steps: list[Step], util) -> None:
        self.item, self.ctx, self.util = item, ctx, util
        self.work = ctx.work_root / item.id
        self.work.mkdir(parents=True, exist_ok=True)
        self.log = self.work / "item.log"
        self.steps = list(steps)
        self.parallel = item.kind == "smoke" and len(steps) == 1  # no shared prerequisite
        self.commands: list[str] = []
        self.outputs: list[Path] = []       # each step's stdout
        self.carried: dict | None = None
        self.proc: subprocess.Popen | None = None
        self.stdout = None
        self.start = time.monotonic()
        self.started_at = now_iso()
        self.code: int | None = 0         # the failed step's exit status (0: none failed)
        self.halt = self.stopped = False    # halt: start no further step; stopped: killed
        if item.kind == "queue":
            restored = restore_queue(item, ctx)
            if restored:
                self._note(f"restored {len(restored)} finished run(s) of earlier calls: "
                           + ", ".join(restored))
        self._next()

    def _note(self, text: str) -> None:
        with open(self.log, "a") as log:
            log.write(f"[device-check {now_iso()}] {text}\n")

    def _carry(self, step: Step) -> bool:
        self.commands.append(shlex.join(step.argv))
        try:
            self.carried = carry_step(step.argv, self.item, self.ctx)
        except (OSError, ValueError) as e:
            self._note(f"carry failed: {type(e).__name__}: {e}")
            self.code = 1
            return False
        self._note(f"carried: {json.dumps(self.carried)}")
        return True

    def _next(self) -> None:
        self.proc = None
        while self.steps:
            if self.halt:
                self.stopped = True
                return
            step = self.steps.pop(0)
            if step.skip_if is not None and step.skip_if.exists():
                self._note(f"skipped (made earlier: {step.skip_if}): {shlex.join(step.argv)}")
                continue
            if step.internal:
                if not self._carry(step):
                    self.steps = []
                continue
            self.commands.append(shlex.join(step.argv))
            self._note(f"running: {self.commands[-1]}")
            path = self.work / f"step{len(self.commands)}.out"
            self.outputs.append(path)
            self.stdout = open(path, "w+")
            with open(self.log, "a") as log:
                self.proc = subprocess.Popen(resolve(step.argv), cwd=ROOT, stdout=self.stdout,
                                             stderr=log, env=self.ctx.env,
                                             start_new_session=True)
            return

    def poll(self) -> bool:
        """True once every step is done (or one failed / was stopped)."""
        if self.proc is None:
            return True
        code = self.proc.poll()
        if code is None:
            return False
        self.stdout.flush()
        if code != 0 or self.stopped:
            self.code, self.proc = code, None
            return True
        self.code = 0
        self._next()
        return self.proc is None

    def stop(self, sig: int) -> None:
        """SIGTERM to the running step's own process (`rqa train` stops its loader workers
        itself, writing its checkpoint; run_queue passes it on), SIGKILL to its whole process
        group; no further step starts."""
        self.halt = True
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.stopped = True
        try:
            if sig == signal.SIGKILL:
                os.killpg(self.proc.pid, sig)
            elif self.proc.poll() is None:
                self.proc.send_signal(sig)
        except ProcessLookupError:
            pass

    def output(self):
        """The item's command's JSON: its ``{json}`` file, else its last step's last JSON
        line (a train item: every step's, in order)."""
        json_file = self.work / "output.json"
        if json_file.is_file() and "{json}" in self.item.command:
            return json.loads(json_file.read_text())
        if not self.outputs:
            return None
        if self.stdout is not None:
            self.stdout.flush()
        if self.item.kind == "train":
            return [last_json(p.read_text()) for p in self.outputs]
        return last_json(self.outputs[-1].read_text())

    def record(self) -> dict:
        """The item's JSON: final (passed / failed), partial (a resumable item stopped before
        its end) or interrupted (stopped; it runs again from its start). A stopped item
        still makes its carry sets (a cut training: its newest checkpoint's weights)."""
        ctx, item = self.ctx, self.item
        if self.stopped:
            for step in [s for s in self.steps if s.internal]:
                self._carry(step)
        seconds = round(time.monotonic() - self.start, 1)
        output = self.output()
        passed = self.code == 0 and not self.stopped
        record = {"item": item.id, "kind": item.kind,
                  "command": " && ".join(self.commands) or item.command,
                  "checklist_command": item.command, "device": ctx.env["RQA_DEVICE_NAME"],
                  "versions": json.loads(ctx.env["RQA_DEVICE_VERSIONS"]),
                  "rehearsal": ctx.rehearsal, "started_at": self.started_at,
                  "status": "passed" if passed else "failed", "seconds": seconds,
                  "expected_minutes": item.minutes}
        util = self.util.summary(item.id) if self.util is not None else None
        if util is not None:
            record["gpu_busy_whole_item_mean"] = round(util["mean_percent"], 1)
        record.update(figures(item, output, self.work))
        if self.carried is not None:
            record["carried"] = self.carried
        if item.kind == "queue":
            record["runs"] = queue_records(item, ctx)
            states = [r.get("state", "") for r in (output or {}).get("runs", [])]
            if passed and "left" in states:
                record["status"] = "partial"
            elif passed and any(s.startswith("failed") for s in states):
                record["status"] = "failed"
                record["failed_runs"] = {
                    r["run"]: tail(Path(r["run"]).parent / f"{Path(r['run']).name}.log", 2000)
                    for r in output["runs"] if r["state"].startswith("failed")}
        if self.stopped:
            record["status"] = "partial" if item.resumable else "interrupted"
            record["stopped"] = ("stopped at the deadline (SIGTERM): " + (
                "its finished runs are restored at the next call" if item.resumable else
                "it runs again from its start at the next call (what it finished is here)"))
        if record["status"] == "failed":
            record["error"] = tail(self.log)
            record["exit_code"] = self.code
        record["output"] = output
        return record


def fits(item: Item, ctx: Context) -> bool:
    room = ctx.left() - ctx.grace
    if item.resumable:
        return room >= max(MIN_SLICE_S[ctx.device], 1.0)
    return item.minutes * 60 * ctx.scale <= room and room > 0


def run(items: list[Item], ctx: Context, retry_failed: bool = False) -> dict:
    """Run the unfinished items that fit; returns {finished, left, done_before, stopped,
    did_not_fit, waiting}."""
    from bench.gpu_utilisation import Utilisation

    done_before = [i.id for i in items if finished(i, ctx.output_root, retry_failed)]
    pending = [i for i in items if i.id not in done_before]
    running: list[Runner] = []
    state = {"pid": os.getpid(), "device": ctx.env["RQA_DEVICE_NAME"], "started_at": now_iso(),
             "done_before": done_before, "finished": [], "stopped": [], "did_not_fit": [],
             "waiting": {}, "running": {}, "state": "running"}
    write_status(ctx, state)
    # NVML's busy share (nvidia-smi) over each item that runs alone, for its whole duration
    util = Utilisation("0" if ctx.device == "cuda" else None, poll=None, interval_s=0.5)

    def done(r: Runner) -> None:
        record = r.record()
        path = write_record(record, ctx.output_root)
        state["running"].pop(r.item.id, None)
        state["finished" if record["status"] in ("passed", "failed") else "stopped"].append(
            r.item.id)
        print(f"[{min(ctx.left(), 1e7):6.0f}s left] {record['status']:<11} {r.item.id} in "
              f"{record['seconds']:.0f}s -> {path}", flush=True)
        write_status(ctx, state)

    with util:
        while pending or running:
            if running and ctx.left() <= ctx.grace:      # the deadline: stop all
                for r in running:
                    r.stop(signal.SIGTERM)      # rqa train writes last.ckpt and exits
                while not all(r.poll() for r in running) and ctx.left() > 0.5:
                    time.sleep(0.2)
                for r in running:
                    r.stop(signal.SIGKILL)
                    if r.proc is not None:
                        r.code = r.proc.wait()
                    done(r)
                break
            while pending:
                item = pending[0]
                if running and not (item.kind == "smoke" and len(running) < ctx.jobs
                                    and all(r.parallel for r in running)):
                    break
                steps = steps_of(item, ctx)
                parallel = item.kind == "smoke" and len(steps) == 1
                if running and not parallel:
                    break
                pending.pop(0)
                if not fits(item, ctx):
                    state["did_not_fit"].append(item.id)
                    continue
                waits = ready(item, ctx)
                if waits is not None:
                    state["waiting"][item.id] = waits
                    continue
                running.append(Runner(item, ctx, steps, util))
                if not parallel:
                    util.begin(item.id)
                state["running"][item.id] = now_iso()
                write_status(ctx, state)
                print(f"[{min(ctx.left(), 1e7):6.0f}s left] started     {item.id}", flush=True)
            for r in [r for r in running if r.poll()]:
                running.remove(r)
                if not r.parallel:
                    util.end()
                done(r)
            time.sleep(0.2)
    state["running"] = {}
    state["state"] = "finished"
    state["left"] = [i.id for i in items if not finished(i, ctx.output_root)]
    write_status(ctx, state)
    return state
