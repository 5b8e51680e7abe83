"""Run a queue of `rqa train` runs one after another, resumable, with a deadline.

Each line of the queue file is one run: an output folder, then the `rqa train` overrides
(``#`` starts a comment). A run whose ``result.json`` exists is skipped (done); a run with a
checkpoint resumes (``rqa train`` does that itself). No run is started once the deadline
has passed, so a queue longer than one sitting goes on at the next call. One progress line
per run on stderr (done / running / left, elapsed), a JSON summary as the last stdout line.

    python experiments/run_queue.py QUEUE --output-root runs/gpu [--deadline-s 540]
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path


def parse_queue(path: Path) -> list[tuple[str, list[str]]]:
    runs = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if len(words) < 2 or not any(w.startswith("experiment=") for w in words[1:]):
            raise ValueError(f"{path}:{number}: expected 'FOLDER experiment=NAME [key=value ...]'")
        runs.append((words[0], words[1:]))
    return runs


def run_dir(root: Path, folder: str, overrides: list[str]) -> Path:
    picks = dict(w.split("=", 1) for w in overrides)
    return root / folder / picks["experiment"] / f"{picks.get('profile', 'paper')}-seed{picks.get('seed', 42)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("queue", type=Path)
    parser.add_argument("--output-root", type=Path, required=True)
    parser.add_argument("--deadline-s", type=float, default=float("inf"),
                        help="start no run after this many seconds")
    args = parser.parse_args()
    runs = parse_queue(args.queue)
    start = time.monotonic()
    summary = []
    for i, (folder, overrides) in enumerate(runs):
        where = run_dir(args.output_root, folder, overrides)
        elapsed = time.monotonic() - start
        state = f"[{i + 1}/{len(runs)} {elapsed:6.0f}s]"
        if (where / "result.json").is_file():
            print(f"{state} done     {where}", file=sys.stderr, flush=True)
            summary.append({"run": str(where), "state": "done"})
            continue
        if elapsed > args.deadline_s:
            print(f"{state} left     {where} (deadline)", file=sys.stderr, flush=True)
            summary.append({"run": str(where), "state": "left"})
            continue
        print(f"{state} running  {where}", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        cmd = [sys.executable, "-m", "retrieval_qa.cli", "train", *overrides,
               f"output_dir={args.output_root / folder}"]
        where.parent.mkdir(parents=True, exist_ok=True)
        with open(where.parent / f"{where.name}.log", "a") as log:
            code = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
        summary.append({"run": str(where), "state": "finished" if code.returncode == 0 else
                        f"failed ({code.returncode})", "seconds": round(time.monotonic() - t0, 1)})
        print(f"{state} {summary[-1]['state']} {where} in {summary[-1]['seconds']}s",
              file=sys.stderr, flush=True)
    print(json.dumps({"runs": summary, "seconds": round(time.monotonic() - start, 1)}))


if __name__ == "__main__":
    main()
