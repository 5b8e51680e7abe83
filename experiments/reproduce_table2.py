"""Reproduce the ENDX paper's Table 2 (ReQA SQuAD) beside the paper's numbers, on both
evaluation pools (dev and train), and write results/table2.md and results/table2/*.json.

Each row's result is saved as soon as it is finished, so a crashed or interrupted run resumes
where it stopped (``--force`` recomputes). Rows whose method is not implemented yet, or whose
experiment config does not exist, are listed as "not run" with the reason, never faked.

    python experiments/reproduce_table2.py [--profile cpu|paper] [--rows BM25,Dual-BERTs]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from retrieval_qa.config import conf_dir, load_yaml

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "table2"
METRICS = ("mrr", "r@1", "r@5")


def _rqa(*args: str) -> dict:
    cmd = [sys.executable, "-m", "retrieval_qa.cli", *args]
    print("$ rqa " + " ".join(args), file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"rqa {' '.join(args)} failed with exit code {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_row(row, pool: str, profile: str, checkpoints: dict) -> dict:
    slug = row.name.replace(" ", "_")
    if row.kind == "bm25":
        return _rqa("evaluate", "--model", "bm25", "--dataset", "reqa_squad", "--pool", pool,
                    "--run-file", str(OUT / f"{slug}-{pool}.run.jsonl"), "--quiet")
    if row.kind == "train":
        if not (conf_dir() / "experiment" / f"{row.experiment}.yaml").is_file():
            return {"not_run": f"experiment {row.experiment!r} is not implemented yet"}
        if row.experiment not in checkpoints:
            trained = OUT / f"{slug}-train.json"
            if trained.is_file():
                checkpoints[row.experiment] = json.loads(trained.read_text())
            else:
                checkpoints[row.experiment] = _rqa("train", f"experiment={row.experiment}",
                                                   f"profile={profile}")
                trained.write_text(json.dumps(checkpoints[row.experiment], indent=2))
        ckpt = checkpoints[row.experiment]["checkpoint"]
        return {**_rqa("evaluate", "--checkpoint", ckpt, "--dataset", "reqa_squad", "--pool",
                       pool, "--run-file", str(OUT / f"{slug}-{pool}.run.jsonl"), "--quiet"),
                "training": checkpoints[row.experiment]}
    return {"not_run": "quoted from the paper; the model is not available offline"}


def _cell(result: dict | None, key: str) -> str:
    if not result or "metrics" not in result:
        return "–"
    return f"{result['metrics'][key]:.2f}"


def render(table, results: dict, profile: str) -> str:
    lines = [f"# {table.title}", "",
             f"Profile: `{profile}`. Pools: dev = ReQA built from SQuAD dev-v1.1 (10,250 "
             "candidates, 10,539 questions); train = ReQA built from train-v1.1 (the ReQA "
             "paper's pool). Paper numbers are the paper's, on the pool it used (the "
             "ENDX paper says dev; the BM25 and quoted rows are probably on train).", ""]
    head = "| method | paper " + " | paper ".join(METRICS)
    for pool in table.pools:
        head += " | " + " | ".join(f"{pool} {m}" for m in METRICS)
    lines += [head + " | notes |", "|" + "---|" * (1 + len(METRICS) * (1 + len(table.pools)) + 1)]
    for row in table.rows:
        cells = [row.name, *(f"{row.paper[m]:.2f}" for m in METRICS)]
        notes = []
        for pool in table.pools:
            r = results.get((row.name, pool))
            cells += [_cell(r, m) for m in METRICS]
            if r and "not_run" in r:
                notes.append(r["not_run"])
            elif r and r.get("training", {}).get("pretrained"):
                notes.append(f"encoder: {r['training']['pretrained']}")
        lines.append("| " + " | ".join(cells) + " | " + "; ".join(dict.fromkeys(notes)) + " |")
    lines += ["", "Settings and timings of every run: `results/table2/*.json`; per-question "
              "ranks: `results/table2/*.run.jsonl` (`rqa metrics --run-file F` recomputes them)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="cpu", choices=["cpu", "paper"])
    ap.add_argument("--rows", default=None, help="comma-separated row names (default: all)")
    ap.add_argument("--pools", default=None, help="comma-separated pools (default: dev,train)")
    ap.add_argument("--force", action="store_true", help="recompute finished rows")
    args = ap.parse_args()
    table = load_yaml("tables/endx_table2.yaml")
    if args.pools:
        table.pools = args.pools.split(",")
    wanted = set(args.rows.split(",")) if args.rows else None
    OUT.mkdir(parents=True, exist_ok=True)
    results: dict = {}
    checkpoints: dict = {}
    start = time.time()
    for row in table.rows:
        for pool in table.pools:
            if row.kind == "train" and pool not in table.trained_pools:
                results[(row.name, pool)] = {"not_run": f"trained on train-v1.1: not scored on "
                                                        f"the {pool} pool"}
                continue
            path = OUT / f"{row.name.replace(' ', '_')}-{pool}.json"
            if path.is_file() and not args.force:
                results[(row.name, pool)] = json.loads(path.read_text())
                continue
            if wanted is not None and row.name not in wanted:
                continue
            result = run_row(row, pool, args.profile, checkpoints)
            results[(row.name, pool)] = result
            if "not_run" not in result:
                path.write_text(json.dumps(result, indent=2))
    text = render(table, results, args.profile)
    (ROOT / "results" / "table2.md").write_text(text)
    print(text)
    print(json.dumps({"table": "results/table2.md", "rows": len(table.rows),
                      "seconds": round(time.time() - start, 1)}))


if __name__ == "__main__":
    main()
