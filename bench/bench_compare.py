"""Time of ``rqa compare`` on two ReQA SQuAD dev-pool records (10,539 questions): reading
both records, and the statistics (paired bootstrap, randomisation test, Holm, for MRR, R@k and
doc-level MRR at once), in this process, best of ``--runs``; and the whole command in a fresh
process (Python start-up and imports included). Default inputs: the committed BM25 and
BM25 + paragraph records of results/compare/. Writes ``--out`` (default
results/bench_compare.json) and prints the JSON.

    python -m bench.bench_compare --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from bench.common import RESULTS, ROOT, write_json

RECORDS = ["results/compare/bm25.questions.jsonl.gz",
           "results/compare/bm25_context.questions.jsonl.gz"]


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="*", default=RECORDS)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS / "bench_compare.json"))
    args = parser.parse_args()
    from retrieval_qa.analysis.compare import compare_settings, load_settings

    load, stats = [], []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        settings = load_settings([str(ROOT / r) if not Path(r).is_absolute() else r
                                  for r in args.records])
        t1 = time.perf_counter()
        result = compare_settings(settings)
        stats.append(time.perf_counter() - t1)
        load.append(t1 - t0)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "retrieval_qa.cli", "compare", *args.records],
                   cwd=ROOT, env=env, check=True, capture_output=True)
    command = time.perf_counter() - t0
    out = {"records": args.records, "questions": result["questions"],
           "metrics": result["metrics"], "bootstrap_samples": result["bootstrap_samples"],
           "permutations": result["permutations"],
           "read_seconds": round(min(load), 3), "statistics_seconds": round(min(stats), 3),
           "command_seconds": round(command, 3),
           "threads": os.environ.get("OMP_NUM_THREADS", "default"),
           "machine": f"{platform.machine()}, python {platform.python_version()}, "
                      f"{os.cpu_count()} cores (shared with other jobs)"}
    write_json(out, args.out)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
