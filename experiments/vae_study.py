"""Dual-GRUs vs Dual-VAEs vs Cross-VAEs side by side (issue 11): the same data, steps and
seeds for the three rows, each run `rqa train` under one profile, then its export evaluated on
the ReQA SQuAD dev pool's one-to-many subset (answers with more than 8 questions: MRR, R@1,
R@5 and SSE, Cross-VAEs Table 3). Resumable: a finished run or evaluation is read back, not
redone. Writes ``table.md`` and ``table.json`` (mean and sample std over seeds per row,
beside the paper's numbers) into ``--results-dir``.

Usage: python experiments/vae_study.py [--profile cpu] [--seeds 1,2,3]
       [--train-overrides "trainer.max_steps=150"] [--runs-dir runs/vaes]
       [--results-dir results/vaes] [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROWS = {"Dual-GRUs": "dual_gru", "Dual-VAEs": "dual_vae", "Cross-VAEs": "cross_vae"}
# Cross-VAEs paper: Table 2 (SQuAD, MRR / R@1 / R@5) and Table 3 (answers with > 8 questions:
# MRR / R@1 / R@5 / SSE); its Dual-GRUs row is not in Table 3
PAPER = {"Dual-GRUs": {"mrr": 55.24, "r@1": 44.39, "r@5": 68.00},
         "Dual-VAEs": {"mrr": 61.48, "r@1": 55.01, "r@5": 68.49},
         "Cross-VAEs": {"mrr": 62.29, "r@1": 55.60, "r@5": 70.05, "sub_mrr": 48.52,
                        "sub_r@1": 44.55, "sub_r@5": 53.52, "sse": 0.09}}
METRICS = ("mrr", "r@1", "r@5", "sub_mrr", "sub_r@1", "sub_r@5", "sse")
RQA = [sys.executable, "-m", "retrieval_qa.cli"]


def run(cmd: list[str], out: Path) -> dict:
    """``cmd`` (an `rqa` command) unless ``out`` holds its JSON already; progress on stderr."""
    if out.is_file():
        return json.loads(out.read_text())
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(cmd)}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    return result


def spread(values: list[float]) -> dict:
    values = [v for v in values if v is not None]
    if not values:
        return {"mean": None, "std": None, "n": 0}
    return {"mean": round(statistics.fmean(values), 4),
            "std": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0,
            "n": len(values)}


def cell(s: dict, digits: int = 2) -> str:
    if s["mean"] is None:
        return "-"
    return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}" if s["n"] > 1 else f"{s['mean']:.{digits}f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", default="cpu")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--train-overrides", default="")
    p.add_argument("--runs-dir", default="runs/vaes")
    p.add_argument("--results-dir", default="results/vaes")
    p.add_argument("--min-questions-per-answer", type=int, default=9)
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = Path(args.runs_dir)
    extra = args.train_overrides.split()
    plan = [(row, exp, seed) for row, exp in ROWS.items() for seed in seeds]
    start = time.perf_counter()
    collected: dict[str, list[dict]] = {row: [] for row in ROWS}
    for k, (row, exp, seed) in enumerate(plan, 1):
        folder = runs / exp / f"{args.profile}-seed{seed}"
        train_cmd = [*RQA, "train", f"experiment={exp}", f"profile={args.profile}",
                     f"seed={seed}", f"output_dir={runs}", "threads=1", "test_after_fit=false",
                     *extra]
        # the dev pool, then its subset: the candidates' shards (the same sentences) are
        # encoded once, in the work folder of the run
        full_cmd = [*RQA, "evaluate", "--checkpoint", str(folder / "model"), "--dataset",
                    "reqa_squad", "--pool", "dev", "--quiet", "--work-dir",
                    str(folder / "encodings")]
        eval_cmd = [*full_cmd, "--min-questions-per-answer", str(args.min_questions_per_answer)]
        print(f"[{k}/{len(plan)}] {row} seed {seed} ({time.perf_counter() - start:.0f} s elapsed)",
              file=sys.stderr, flush=True)
        if args.dry_run:
            print("\n".join(" ".join(c) for c in (train_cmd, full_cmd, eval_cmd)))
            continue
        report = run(train_cmd, folder / "study_train.json")
        full = run(full_cmd, folder / "study_dev.json")
        subset = run(eval_cmd, folder / "study_subset.json")
        collected[row].append({"seed": seed, "report": report, "full": full, "subset": subset})
    if args.dry_run:
        return
    table = {"profile": args.profile, "train_overrides": extra, "seeds": seeds,
             "machine": f"{platform.machine()}, {os.cpu_count()} cores, 1 torch thread",
             "commands": {"study": "python experiments/vae_study.py " + " ".join(sys.argv[1:])},
             "rows": {}}
    lines = [f"# Dual-GRUs vs Dual-VAEs vs Cross-VAEs (profile {args.profile}"
             f"{', ' + ' '.join(extra) if extra else ''})", "",
             f"ReQA SQuAD dev pool (10,539 questions) and its subset of answers with at least "
             f"{args.min_questions_per_answer} questions (`sub_`, SSE). Mean ± sample std over "
             f"seeds {args.seeds}; paper numbers in brackets (Cross-VAEs paper, Tables 2 and 3, "
             "BERT token embeddings and 100 epochs; here MiniLM's and the reductions of the "
             "profile).", "",
             "| row | " + " | ".join(METRICS) + " | train s / run | s per 1k pairs |",
             "|---|" + "---|" * (len(METRICS) + 2)]
    for row, items in collected.items():
        values = {m: [] for m in METRICS}
        secs, per_pair = [], []
        for it in items:
            test, sub = it["full"]["metrics"], it["subset"]
            for m in ("mrr", "r@1", "r@5"):
                values[m].append(test[m])
                values[f"sub_{m}"].append(sub["metrics"][m])
            values["sse"].append(sub.get("sse"))
            secs.append(it["report"]["train_seconds"])
            pairs = it["report"]["global_steps"] * it["report"]["data"]["batch_size"]
            per_pair.append(1000 * it["report"]["train_seconds"] / max(pairs, 1))
        stats = {m: spread(values[m]) for m in METRICS}
        table["rows"][row] = {"experiment": ROWS[row], "metrics": stats,
                              "paper": PAPER.get(row, {}),
                              "train_seconds": spread(secs), "seconds_per_1k_pairs": spread(per_pair),
                              "description": items[0]["report"]["description"] if items else None,
                              "runs": [str(runs / ROWS[row] / f"{args.profile}-seed{it['seed']}")
                                       for it in items]}
        paper = PAPER.get(row, {})
        cells = [cell(stats[m], 3 if m == "sse" else 2)
                 + (f" [{paper[m]}]" if m in paper else "") for m in METRICS]
        lines.append(f"| {row} | " + " | ".join(cells)
                     + f" | {cell(spread(secs), 0)} | {cell(spread(per_pair), 1)} |")
    out = Path(args.results_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.json").write_text(json.dumps(table, indent=2) + "\n")
    (out / "table.md").write_text("\n".join(lines) + "\n")
    print(json.dumps({"results": str(out / "table.md"),
                      "rows": {r: {m: v["metrics"][m]["mean"] for m in ("mrr", "sse")}
                               for r, v in table["rows"].items()}}))


if __name__ == "__main__":
    main()
