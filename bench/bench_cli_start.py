"""Start-up of the command line: wall and CPU seconds of ``python -m retrieval_qa.cli`` for
``--help``, ``evaluate --help``, ``train --help`` (it reads conf/experiment/), an argument
error and an override of the wrong type (both exit 2), each run ``--runs`` times in a fresh
process; with ``--bm25``, also ``rqa evaluate --model bm25 --quiet`` on the ReQA SQuAD dev
pool (read from the pool cache: run it once before), ``--bm25-runs`` times.

``--source DIR`` times another checkout of the project instead of this one (e.g. an older
commit extracted with ``git archive``), under the same label set, so a before/after pair is
two calls. Every command runs in an empty temporary folder (a run folder an old version writes
lands there). Writes ``--out`` (default results/bench_cli_start.json; an existing file keeps
its other sources) and prints the JSON.

    python -m bench.bench_cli_start --runs 5 --bm25
    git archive OLD retrieval_qa conf | tar -x -C runs/rqa-before   # (mkdir it first)
    python -m bench.bench_cli_start --source runs/rqa-before --label before --bm25
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import RESULTS, ROOT, write_json

COMMANDS = {
    "--help": ["--help"],
    "evaluate --help": ["evaluate", "--help"],
    "train --help": ["train", "--help"],
    "argument error": ["evaluate", "--dataset", "no_such_dataset"],
    "override type error": ["train", "experiment=dual_gru", "trainer.max_steps=abc"],
}
BM25 = ["evaluate", "--model", "bm25", "--dataset", "reqa_squad", "--pool", "dev", "--quiet"]


def timed(argv: list[str], source: Path, timeout: float) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system of the child) and exit status of one run."""
    env = {**os.environ, "PYTHONPATH": str(source), "HF_HUB_OFFLINE": "1",
           "WANDB_MODE": "offline"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as cwd:
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "retrieval_qa.cli", *argv], cwd=cwd,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=timeout)
        wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode


def summary(argv: list[str], source: Path, runs: int, timeout: float) -> dict:
    rows = [timed(argv, source, timeout) for _ in range(runs)]
    walls, cpus, codes = zip(*rows, strict=True)
    return {"argv": argv, "exit_codes": sorted(set(codes)),
            "wall_s": [round(w, 3) for w in walls], "cpu_s": [round(c, 3) for c in cpus],
            "wall_median_s": round(statistics.median(walls), 3),
            "wall_min_s": round(min(walls), 3),
            "cpu_median_s": round(statistics.median(cpus), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="runs of each start-up command")
    ap.add_argument("--bm25", action="store_true", help="also time rqa evaluate --model bm25")
    ap.add_argument("--bm25-runs", type=int, default=2)
    ap.add_argument("--source", type=Path, default=ROOT,
                    help="the checkout whose retrieval_qa is timed")
    ap.add_argument("--label", default="this checkout", help="the key of these timings")
    ap.add_argument("--only", default=None,
                    help="comma-separated command names of COMMANDS (default: all)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per run")
    ap.add_argument("--out", type=Path, default=RESULTS / "bench_cli_start.json")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(COMMANDS)
    load = os.getloadavg()
    source = args.source.resolve()  # the commands run in temporary folders
    timings = {name: summary(COMMANDS[name], source, args.runs, args.timeout) for name in names}
    if args.bm25:
        timings["evaluate --model bm25 (cached pool)"] = summary(BM25, source, args.bm25_runs,
                                                                 args.timeout)
    import platform

    result = json.loads(args.out.read_text()) if args.out.is_file() else {}
    result.setdefault("what", __doc__.split("\n\n")[0].replace("\n", " "))
    result.setdefault("sources", {})[args.label] = {
        "timings": timings, "runs": args.runs, "cores": os.cpu_count(),
        "python": platform.python_version(), "load_avg_start": [round(x, 2) for x in load],
        "load_avg_end": [round(x, 2) for x in os.getloadavg()]}
    write_json(result, args.out)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
