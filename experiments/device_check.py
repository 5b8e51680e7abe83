"""Run the device checklist (experiments/queues/device_checklist.txt): the next unfinished
items that fit before a deadline, each into one JSON, resumable across calls and turns.

    python experiments/device_check.py --deadline SECONDS [--device cuda|cpu] [--detach]
        [--output-root results/gpu/checklist] [--work-root runs/device-check] [--jobs N]
        [--only ID,ID] [--retry-failed] [--carry-in .device/carry]
    python experiments/device_check.py --status        # progress of a detached run
    python experiments/device_check.py --bundle FILE   # the results so far, as one .tar.gz
    python experiments/device_check.py --return-carry DIR [--max-files 7]  # carry parts
    python experiments/device_check.py --unbundle FILE # into the output root (collecting)

Items run in the checklist's order. A finished item (``OUTPUT_ROOT/ID.json``) is never run
again (``--retry-failed`` reruns the failed ones). An item starts only if its expected minutes
fit before the deadline (one stopped there anyway leaves ``ID.partial.json``, status
``interrupted``, with what it finished, and runs again from its start); an item that waits for
another (``{carried:ID}``, ``{record:ID}``) starts once that is there; a resumable item
(``queue``) starts whenever a few minutes are left and goes on where it stopped: its finished
runs are kept in ``OUTPUT_ROOT/ID.partial.json`` and restored on the next call, also on a
fresh machine. Before the deadline every running item gets SIGTERM (``rqa train`` writes
``last.ckpt`` and stops), then SIGKILL; a stopped item's ``carry`` steps still run (a cut
training leaves its newest weights, bf16, in its carry set). Smoke items run ``--jobs`` at
once (default 4 on a GPU).

Each item's JSON holds ``item``, ``command``, ``device`` (the GPU's name, or the CPU's in the
rehearsal), ``versions``, ``status`` (passed / failed), ``seconds``, ``expected_minutes``,
its figures under self-explaining keys (``dev_pool_seconds``, ``ratio_ours_over_st``,
``gpu_busy_mean``, ``mrr``, ``runs`` with each training's seed, reductions and test pool,
...), ``carried`` (its carry set), ``output`` (the command's own JSON) and, when it failed,
``error`` (the tail of its log). The parts live in experiments/device/ (its docstring).

``--device cpu`` is the rehearsal: every item on the CPU with tiny settings (2 training steps,
batch 4, a few texts per bench, Table 2's BM25 and Dual-GRUs rows or the item's own row, a
queue through its first pass, a recipe's make composed with ``-n``, not run), so that the checklist, its JSON, its carry sets and its resume
are tested without a GPU (tests/test_device_check.py, tests/test_device_stages.py, on tiny
data and a tiny model standing in for the packaged MiniLM). Its JSONs say
``"rehearsal": true`` and its figures measure nothing. It writes into runs/device-rehearsal/
(or an ``--output-root`` of its own; never results/gpu/checklist/, which holds GPU results).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from experiments.device.carry import PART_BYTES  # noqa: E402
from experiments.device.checklist import (  # noqa: E402,F401
    CARRY_IN,
    CHECKLIST,
    COLLECTED,
    GRACE_S,
    KINDS,
    LOG_FILE,
    OUTPUT_ROOT,
    PID_FILE,
    REHEARSAL_ROOT,
    SAME_GPU_PROFILE,
    TURN_SECONDS,
    WORK_ROOT,
    Item,
    parse_checklist,
    plan_turns,
)
from experiments.device.commands import (  # noqa: E402,F401
    REHEARSAL_TRAIN,
    Context,
    Step,
    resolve,
    set_option,
    shrink,
    steps_of,
    words_of,
)
from experiments.device.records import (  # noqa: E402,F401
    device_name,
    figures,
    now_iso,
    queue_records,
    queue_runs,
    restore_queue,
    shorten_paths,
    versions,
    write_status_file,
)
from experiments.device.runner import run  # noqa: E402
from experiments.device.status import (  # noqa: E402,F401
    bundle,
    return_carry,
    status_text,
    unbundle,
)


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checklist", type=Path, default=CHECKLIST)
    ap.add_argument("--deadline", type=float, default=None,
                    help="seconds from now by which every item has stopped (default: none)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cuda (default), or cpu: the rehearsal with tiny settings")
    ap.add_argument("--output-root", type=Path, default=None,
                    help="where each item's JSON goes (default: results/gpu/checklist; with "
                         "--device cpu runs/device-rehearsal/checklist)")
    ap.add_argument("--work-root", type=Path, default=None,
                    help="runs, logs and the status (default: runs/device-check; with "
                         "--device cpu runs/device-rehearsal)")
    ap.add_argument("--jobs", type=int, default=None,
                    help="smoke items at once (default 4 on cuda, 1 on cpu)")
    ap.add_argument("--only", default=None, help="comma-separated item ids (default: all)")
    ap.add_argument("--retry-failed", action="store_true", help="run failed items again")
    ap.add_argument("--estimate-scale", type=float, default=None,
                    help="expected seconds = minutes * 60 * this (default 1 on cuda; 0 on "
                         "cpu, whose items are tiny)")
    ap.add_argument("--grace", type=float, default=None,
                    help="seconds before the deadline at which running items get SIGTERM "
                         "(default 45 on cuda, 8 on cpu)")
    ap.add_argument("--carry-in", type=Path, default=CARRY_IN,
                    help="the carry sets that travelled in, one folder an item (default "
                         ".device/carry, where `make device-collect` puts them)")
    ap.add_argument("--part-bytes", type=int, default=PART_BYTES,
                    help="the largest part of a carry set (default 15 MiB: a file back is at "
                         "most 16 MiB)")
    ap.add_argument("--detach", action="store_true",
                    help="run in a new session in the background (log: WORK_ROOT/"
                         f"{LOG_FILE}) and return at once")
    ap.add_argument("--status", action="store_true", help="print progress and exit")
    ap.add_argument("--plan", action="store_true",
                    help="print the turns the items left would take, by their estimates")
    ap.add_argument("--bundle", type=Path, default=None, help="write the results as a .tar.gz")
    ap.add_argument("--return-carry", type=Path, default=None, metavar="DIR",
                    help="copy carry files not yet handed back into DIR (a poll's $OUT)")
    ap.add_argument("--max-files", type=int, default=7,
                    help="--return-carry: at most this many (a call brings back 8 files, one "
                         "of them the bundle)")
    ap.add_argument("--unbundle", type=Path, default=None,
                    help="extract a bundle's results into the output root, and the carry "
                         "files beside it into --carry-in")
    return ap.parse_args(argv)


def plan_text(items: list[Item], output_root: Path) -> str:
    """The turns of :func:`plan_turns` for the items without a final record, in words."""
    done = {i.id for i in items if (output_root / f"{i.id}.json").is_file()}
    turns, never = plan_turns(items, done)
    lines = [f"{len(items) - len(done)} items left, {len(turns)} turns of "
             f"{TURN_SECONDS / 60:g} minutes by their estimates:"]
    for n, turn in enumerate(turns, 1):
        lines.append(f"turn {n} ({sum(i.minutes for i in turn):g} min): "
                     + ", ".join(f"{i.id} ({i.minutes:g})" for i in turn))
    if never:
        lines.append("no turn can take: " + ", ".join(i.id for i in never))
    return "\n".join(lines)


def _select(items: list[Item], only: str | None) -> list[Item]:
    if not only:
        return items
    wanted = only.split(",")
    unknown = sorted(set(wanted) - {i.id for i in items})
    if unknown:
        raise SystemExit(f"--only: unknown item(s) {unknown}; items: {[i.id for i in items]}")
    return [i for i in items if i.id in wanted]


def _detach(args, argv: list[str]) -> None:
    args.work_root.mkdir(parents=True, exist_ok=True)
    log = open(args.work_root / LOG_FILE, "a")
    child = [sys.executable, str(Path(__file__).resolve()), *[a for a in argv if a != "--detach"]]
    proc = subprocess.Popen(child, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    (args.work_root / PID_FILE).write_text(f"{proc.pid}\n")
    # the status says "running" from now on, not the last run's state (or none) until the
    # child has imported torch and written its own: a poll at once would stop waiting
    write_status_file(args.work_root, {
        "pid": proc.pid, "state": "running", "started_at": now_iso(), "running": {}},
        float("inf") if args.deadline is None else args.deadline)
    print(f"device-check started in the background: pid {proc.pid}, log "
          f"{args.work_root / LOG_FILE}; progress: --status (make device-check-status)")


def main(argv=None) -> int:
    args = parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    rehearsal = args.device == "cpu"
    args.output_root = args.output_root or (REHEARSAL_ROOT / "checklist" if rehearsal
                                            else OUTPUT_ROOT)
    args.work_root = args.work_root or (REHEARSAL_ROOT if rehearsal else WORK_ROOT)
    items = _select(parse_checklist(args.checklist), args.only)
    if args.status:
        print(status_text(items, args.output_root, args.work_root))
        return 0
    if args.plan:
        print(plan_text(items, args.output_root))
        return 0
    if args.bundle:
        print(bundle(args.bundle, args.output_root, args.work_root))
        return 0
    if args.return_carry:
        names, left = return_carry(args.work_root, args.return_carry, args.max_files)
        print(f"carry files handed back: {len(names)} ({', '.join(names) or 'none'}); "
              f"{left} left for the next poll")
        return 0
    if args.unbundle:
        work_to = COLLECTED / dt.datetime.now().strftime("%Y-%m-%d_%H%M%S")
        written = unbundle(args.unbundle, args.output_root, work_to, args.carry_in)
        jsons = [w for w in written if w.startswith(str(args.output_root))]
        carried = [w for w in written if w.startswith(str(args.carry_in))]
        print(f"{len(jsons)} checklist JSONs into {args.output_root}; the turn's logs and run "
              f"files ({len(written) - len(jsons) - len(carried)}) into {work_to} (not "
              "committed: copy what a results README cites); carry files: "
              f"{len(carried)} into {args.carry_in} (the next `make device-pack` counts them, "
              "the next turn restores them)")
        return 0
    if rehearsal and args.output_root.resolve() == OUTPUT_ROOT.resolve():
        raise SystemExit("--device cpu is the rehearsal: give it an --output-root of its own "
                         f"(not {OUTPUT_ROOT.relative_to(ROOT)}, which holds GPU results)")
    if args.detach:
        _detach(args, argv)
        return 0
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch sees no GPU here; the CPU rehearsal is "
                             "--device cpu with an --output-root of its own")
    deadline = args.deadline if args.deadline is not None else float("inf")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "WANDB_MODE": "offline",
           "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"),
           "RQA_DEVICE_NAME": device_name(args.device),
           "RQA_DEVICE_VERSIONS": json.dumps(versions()),
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [
               os.environ.get("PYTHONPATH")])])}
    ctx = Context(args.device, args.output_root.resolve(), args.work_root.resolve(),
                  time.monotonic() + deadline,
                  args.jobs or (4 if args.device == "cuda" else 1),
                  args.estimate_scale if args.estimate_scale is not None
                  else (1.0 if args.device == "cuda" else 0.0), env,
                  args.grace if args.grace is not None else GRACE_S[args.device],
                  args.carry_in.resolve(), args.part_bytes)
    print(f"device-check on {env['RQA_DEVICE_NAME']}: {len(items)} items, deadline "
          f"{deadline:g} s, results -> {ctx.output_root}", flush=True)
    state = run(items, ctx, args.retry_failed)
    left = state["left"]
    waiting = "; ".join(f"{k} {v}" for k, v in state["waiting"].items())
    print(f"finished now: {', '.join(state['finished']) or 'none'}; stopped at the deadline: "
          f"{', '.join(state['stopped']) or 'none'}; did not fit: "
          f"{', '.join(state['did_not_fit']) or 'none'}; waiting: {waiting or 'none'}")
    print(f"left: {len(left)} items, about {sum(i.minutes for i in items if i.id in left):g} "
          f"GPU minutes: {', '.join(left) or 'none'}")
    print(json.dumps({"finished": state["finished"], "stopped": state["stopped"],
                      "waiting": state["waiting"], "left": left}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
