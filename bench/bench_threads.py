"""Training steps per second of a CPU profile for several torch thread settings, optionally
with another process busy on one core (a laptop running something else).

    python -m bench.bench_threads --threads auto,2 --busy 1 --steps 30 experiment=dual_gru profile=cpu

Each setting runs `rqa train` in its own process (threads are process-wide) with
``trainer.max_steps`` set, and times the steps after the first ``--warmup`` ones from the
trainer's batch-end hooks. Prints one JSON object (last line of stdout)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT

CHILD = r"""
import json, sys, time
import pytorch_lightning as pl
from retrieval_qa.training import run as R
from retrieval_qa.training.compose import compose
times = []
class Timer(pl.Callback):
    def on_train_batch_end(self, trainer, *a):
        times.append(time.perf_counter())
build = R.build_trainer
def build_trainer(cfg, run_dir):
    t = build(cfg, run_dir)
    t.callbacks.append(Timer())
    return t
R.build_trainer = build_trainer
report = R.train(compose(sys.argv[2:]))
w = int(sys.argv[1])
steps = len(times) - 1 - w
print(json.dumps({"threads": report["threads"], "steps_timed": steps,
                  "steps_per_s": round(steps / (times[-1] - times[w]), 3)}))
"""


def busy_loop() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="auto,2", help="comma-separated settings")
    ap.add_argument("--busy", type=int, default=1, help="busy-loop processes during the runs")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per setting")
    ap.add_argument("overrides", nargs="*", default=["experiment=dual_gru", "profile=cpu"])
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="bench-threads-"))
    rows = []
    load = [busy_loop() for _ in range(args.busy)]
    try:
        time.sleep(2)
        for setting in args.threads.split(","):
            cmd = [sys.executable, "-c", CHILD, str(args.warmup), *args.overrides,
                   f"trainer.max_steps={args.steps}", "test_after_fit=false", "logger=csv",
                   "trainer.enable_progress_bar=false", "resume=never",
                   "data.max_val_questions=100", f"output_dir={out / setting}"]
            env = {**os.environ, "RQA_THREADS": setting, "PYTHONPATH": str(ROOT)}
            print(f"threads={setting} ...", file=sys.stderr, flush=True)
            start = time.perf_counter()
            try:
                proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env,
                                      timeout=args.timeout)
                row = json.loads(proc.stdout.strip().splitlines()[-1])
            except subprocess.TimeoutExpired:
                row = {"threads": setting, "steps_per_s": None,
                       "note": f"stopped after {args.timeout} s"}
            row.update(setting=setting, wall_s=round(time.perf_counter() - start, 1))
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
    finally:
        for p in load:
            p.kill()
    print(json.dumps({"busy_processes": args.busy, "cores": os.cpu_count(),
                      "load_avg_1min": os.getloadavg()[0], "overrides": args.overrides,
                      "steps": args.steps, "rows": rows}))


if __name__ == "__main__":
    main()
