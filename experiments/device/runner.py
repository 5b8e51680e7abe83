"""Running the checklist: each item a step of the one runner (retrieval_qa/sweeps/runner.py:
the unfinished items that fit before the deadline, in order, each command a subprocess of its
own process group, SIGTERM to every running item before the deadline, then SIGKILL); here what
is the checklist's own: an item's commands and carry steps, what it waits for, its JSON
written when it ends (:mod:`.records`) and the status a poll reads."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from retrieval_qa.evaluation.ledger import FAMILY_ENV
from retrieval_qa.sweeps.runner import Action, Process, Record, Step, run_steps

from . import carry
from .checklist import LEDGER_FAMILY, MIN_SLICE_S, ROOT, Item
from .commands import Context, carried_dir, resolve, steps_of
from .commands import Step as CommandStep
from .records import (
    figures,
    finished,
    json_lines,
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


class ItemStep(Step):
    """A checklist item as a step of the one runner: its commands one after another in
    subprocesses of their own sessions (``carry`` steps done here, and still done when the
    item is stopped), its JSON written when it ends, the run's state and status kept."""

    def __init__(self, item: Item, ctx: Context, state: dict, util, retry_failed: bool
                 ) -> None:
        self.item, self.ctx, self.state, self.util = item, ctx, state, util
        self.retry_failed = retry_failed
        self.name = item.id
        self.estimate_s = (max(MIN_SLICE_S[ctx.device], 1.0) if item.resumable
                           else item.minutes * 60 * ctx.scale)
        self._steps: list[CommandStep] | None = None
        self.carried: dict | None = None

    def steps(self) -> list[CommandStep]:
        if self._steps is None:
            self._steps = steps_of(self.item, self.ctx)
        return self._steps

    @property
    def parallel(self) -> bool:  # a smoke item with no shared prerequisite
        return self.item.kind == "smoke" and len(self.steps()) == 1

    def done(self) -> bool:
        return finished(self.item, self.ctx.output_root, self.retry_failed) is not None

    def ready(self) -> str | None:
        return ready(self.item, self.ctx)

    def passed(self, record: Record) -> None:
        if record.state == "reused":
            self.state["done_before"].append(self.item.id)
        elif record.state == "waiting":
            self.state["waiting"][self.item.id] = record.reason
        elif record.state == "left" and record.reason == "deadline":
            self.state["did_not_fit"].append(self.item.id)

    def _note(self, text: str) -> None:
        with open(self.work / "item.log", "a") as log:
            log.write(f"[device-check {now_iso()}] {text}\n")

    def _carry(self, argv: list[str]) -> bool:
        try:
            self.carried = carry_step(argv, self.item, self.ctx)
        except (OSError, ValueError) as e:
            self._note(f"carry failed: {type(e).__name__}: {e}")
            return False
        self._note(f"carried: {json.dumps(self.carried)}")
        return True

    def start(self) -> Process:
        item, ctx = self.item, self.ctx
        steps = self.steps()
        self.work = ctx.work_root / item.id
        self.work.mkdir(parents=True, exist_ok=True)
        self.started_at = now_iso()
        if item.kind == "queue":
            restored = restore_queue(item, ctx)
            if restored:
                self._note(f"restored {len(restored)} finished run(s) of earlier calls: "
                           + ", ".join(restored))
        actions = [Action(call=(lambda argv=s.argv: self._carry(argv)), shown=shlex.join(s.argv),
                          always=True) if s.internal else
                   Action(resolve(s.argv), shown=shlex.join(s.argv), skip_if=s.skip_if)
                   for s in steps]
        family = ("gpu_" if ctx.device == "cuda" else "rehearsal_") \
            + LEDGER_FAMILY.get(item.kind, item.kind)
        job = Process(actions, cwd=ROOT, env={**ctx.env, FAMILY_ENV: family},
                      log=self.work / "item.log",
                      stdout=lambda n: self.work / f"step{n}.out", note=self._note)
        if not self.parallel:
            self.util.begin(item.id)
        self.state["running"][item.id] = now_iso()
        write_status(ctx, self.state)
        print(f"[{min(ctx.left(), 1e7):6.0f}s left] started     {item.id}", flush=True)
        return job

    def output(self, job: Process):
        """The item's command's JSON: its ``{json}`` file, else its last step's last JSON
        line (a train item: every step's, in order)."""
        json_file = self.work / "output.json"
        if json_file.is_file() and "{json}" in self.item.command:
            return json.loads(json_file.read_text())
        if not job.outputs:
            return None
        job.flush()
        if self.item.kind == "train":
            return [last_json(p.read_text()) for p in job.outputs]
        if self.item.kind == "recipe":  # every report its steps printed
            return [o for p in job.outputs for o in json_lines(p.read_text())]
        return last_json(job.outputs[-1].read_text())

    def end(self, job: Process, record: Record) -> str:
        if not self.parallel:
            self.util.end()
        data = self.record(job, record.seconds)
        path = write_record(data, self.ctx.output_root)
        self.state["running"].pop(self.item.id, None)
        self.state["finished" if data["status"] in ("passed", "failed") else "stopped"].append(
            self.item.id)
        print(f"[{min(self.ctx.left(), 1e7):6.0f}s left] {data['status']:<11} {self.item.id} "
              f"in {data['seconds']:.0f}s -> {path}", flush=True)
        write_status(self.ctx, self.state)
        return "stopped" if job.stopped else "finished" if job.code == 0 else "failed"

    def record(self, job: Process, seconds: float) -> dict:
        """The item's JSON: final (passed / failed), partial (a resumable item stopped before
        its end) or interrupted (stopped; it runs again from its start). A stopped item
        still made its carry sets (a cut training: its newest checkpoint's weights)."""
        ctx, item = self.ctx, self.item
        output = self.output(job)
        passed = job.code == 0 and not job.stopped
        record = {"item": item.id, "kind": item.kind,
                  "command": " && ".join(job.commands) or item.command,
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
        if job.stopped:
            record["status"] = "partial" if item.resumable else "interrupted"
            record["stopped"] = ("stopped at the deadline (SIGTERM): " + (
                "its finished runs are restored at the next call" if item.resumable else
                "it runs again from its start at the next call (what it finished is here)"))
        if record["status"] == "failed":
            record["error"] = tail(self.work / "item.log")
            record["exit_code"] = job.code
        record["output"] = output
        return record


def run(items: list[Item], ctx: Context, retry_failed: bool = False) -> dict:
    """Run the unfinished items that fit (on the one runner, retrieval_qa/sweeps/runner.py);
    returns {finished, left, done_before, stopped, did_not_fit, waiting}."""
    from bench.gpu_utilisation import Utilisation

    state = {"pid": os.getpid(), "device": ctx.env["RQA_DEVICE_NAME"], "started_at": now_iso(),
             "done_before": [], "finished": [], "stopped": [], "did_not_fit": [], "waiting": {}, "running": {},
             "state": "running"}
    write_status(ctx, state)
    # NVML's busy share (nvidia-smi) over each item that runs alone, for its whole duration
    util = Utilisation("0" if ctx.device == "cuda" else None, poll=None, interval_s=0.5)
    with util:
        steps = [ItemStep(i, ctx, state, util, retry_failed) for i in items]
        run_steps(steps, deadline_at=ctx.deadline_at, grace=ctx.grace, jobs=ctx.jobs)
    state["running"] = {}
    state["state"] = "finished"
    state["left"] = [i.id for i in items if not finished(i, ctx.output_root)]
    write_status(ctx, state)
    return state
