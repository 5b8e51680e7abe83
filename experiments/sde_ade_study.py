"""SDE vs ADE variants (SDE/ADE paper, Table 2 and Figure 2) from the
``sde_ade`` sweep (conf/sweeps/sde_ade.yaml): five tower-sharing variants, 3 seeds.

Steps, each skipped when finished (an interrupted study resumes with the same command):

1. ``rqa sweep sde_ade`` (each run tested on the paper's pool, MultiReQA SQuAD test);
   ``--no-train`` tabulates the runs that are there.
2. Each finished run's exported model on the pool its own test did not cover (ReQA SQuAD dev;
   MultiReQA SQuAD test for runs tested elsewhere): ``rqa evaluate --checkpoint RUN/model
   --dataset D --pool P``, kept as ``RUN/D_P.json``. ``--pools multireqa`` skips ReQA.
3. ``table2.{md,json}`` in ``--results-dir``: per variant, MultiReQA SQuAD test P@1 / MRR (the
   rows' top-level metrics, as ``notebooks/results_overview.ipynb`` reads them) and ReQA SQuAD
   dev MRR / R@1 / R@5 (mean ± sample std over seeds), the MRR gain over ADE as the paper's
   Figure 3 draws it, and the paper's numbers beside them.
4. ``figure2.{png,json}``: ``rqa analyze towers`` (400 random QA pairs of MultiReQA SQuAD test,
   t-SNE per model, the same-tower neighbour share) on the lowest seed of every variant.
5. ``budget.{md,json}``, when ``--budget-runs`` holds runs (``rqa train experiment=E
   profile=cpu trainer.max_steps=500 data.max_train_pairs=16000 trainer.val_check_interval=125
   test_after_fit=false output_dir=runs/sde_ade_budget``): their validation curves (the CSV
   log), beside the sweep's runs validated once at the end.

    python experiments/sde_ade_study.py [--no-train] [--sweep-dir runs/sweeps/sde_ade]
        [--results-dir results/sde_ade]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retrieval_qa.analysis.common import (  # noqa: E402
    RUN_FILES,
    cell,
    logged_rows,
    markdown_table,
    paper_table_rows,
    spread,
    write_json,
)
from retrieval_qa.analysis.sweep_runs import load_sweep_runs  # noqa: E402
from retrieval_qa.runtime import run_rqa  # noqa: E402
from retrieval_qa.sweeps.table import write_run_files  # noqa: E402

SWEEP = "sde_ade"
TABLE = "sde_ade_table2"
POOLS = {"multireqa": ("multireqa_squad", "test", ("p@1", "mrr")),  # the paper's
         "reqa": ("reqa_squad", "dev", ("mrr", "r@1", "r@5"))}


def pool_metrics(run: dict, pool: str) -> dict | None:
    """A finished run's metrics on one of POOLS: its own test, else its evaluation file."""
    dataset, split, _ = POOLS[pool]
    test = run["report"].get("test") or {}
    if (test.get("dataset"), test.get("pool")) == (dataset, split):
        return test["metrics"]
    path = Path(run["run_dir"]) / f"{dataset}_{split}.json"
    return json.loads(path.read_text(encoding="utf-8"))["metrics"] if path.is_file() else None


def evaluate_runs(runs: list[dict], pools, rqa=run_rqa) -> None:
    """Step 2: each of ``pools`` for every finished run, unless its test was that pool (the
    result kept in the run folder)."""
    for r in runs:
        for pool in pools:
            if r["report"] is None or pool_metrics(r, pool) is not None:
                continue
            dataset, split, _ = POOLS[pool]
            got = rqa(["evaluate", "--checkpoint", Path(r["run_dir"]) / "model", "--dataset",
                       dataset, "--pool", split, "--quiet"], cwd=ROOT)
            (Path(r["run_dir"]) / f"{dataset}_{split}.json").write_text(
                json.dumps(got, indent=2) + "\n", encoding="utf-8")


def build_table(runs: list[dict]) -> dict:
    """Step 3: one row per paper row; runs grouped by their experiment."""
    by_exp: dict[str, list[dict]] = {}
    for r in runs:
        if r["report"] is not None:
            by_exp.setdefault(r["report"]["experiment"], []).append(r)
    rows = []
    for paper in paper_table_rows(TABLE):
        done = sorted(by_exp.get(paper.get("experiment"), []),
                      key=lambda r: r["report"]["seed"])
        found = {pool: [(r["report"]["seed"], pool_metrics(r, pool)) for r in done]
                 for pool in POOLS}
        stats = {pool: {m: spread([got.get(m) for _, got in found[pool] if got is not None])
                        for m in POOLS[pool][2]} for pool in POOLS}
        rows.append({
            "name": paper["name"], "experiment": paper.get("experiment"), "paper": paper["paper"],
            **stats["multireqa"], "reqa": stats["reqa"],  # the paper's pool's metrics on top
            **{f"{pool}_seeds": [seed for seed, got in found[pool] if got is not None]
               for pool in POOLS},
            "run_dirs": [r["run_dir"] for r in done],
            "description": done[0]["report"].get("description") if done else None,
            "train_seconds": spread([r["report"].get("train_seconds") for r in done])})
    ade = next((r for r in rows if r["experiment"] == "ade"), None)
    for r in rows:
        r["mrr_gain_over_ade_pct"] = {
            "ours": _gain(_mean(r["mrr"]), ade and _mean(ade["mrr"])),
            "paper": _gain(r["paper"]["mrr"], ade and ade["paper"]["mrr"])}
    return {"title": "SDE vs ADE variants: MultiReQA SQuAD test and ReQA SQuAD dev",
            "table": TABLE, "sweep": SWEEP, "pools": {k: "/".join(v[:2]) for k, v in POOLS.items()},
            "rows": rows,
            "made": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}


def _mean(stat: dict | None) -> float | None:
    return stat["mean"] if stat else None


def _gain(value: float | None, ade: float | None) -> float | None:
    """(value - ADE) / ADE in %, the paper's Figure 3 measure."""
    if value is None or not ade:
        return None
    return round(100 * (value - ade) / ade, 2)


def _seeds(seeds: list[int]) -> str:
    return ", ".join(map(str, seeds)) or "–"


def render(table: dict) -> str:
    header = ["variant", "P@1 (ours)", "MRR (ours)", "ΔMRR vs ADE %", "P@1 (paper)",
              "MRR (paper)", "ΔMRR vs ADE % (paper)", "ReQA MRR", "ReQA R@1", "ReQA R@5",
              "seeds (MultiReQA / ReQA)"]
    body = []
    for r in table["rows"]:
        gain = r["mrr_gain_over_ade_pct"]
        body.append([r["name"], cell(r["p@1"]), cell(r["mrr"]),
                     "–" if gain["ours"] is None else f"{gain['ours']:+.2f}",
                     f"{r['paper']['p@1']:.2f}", f"{r['paper']['mrr']:.2f}",
                     "–" if gain["paper"] is None or not r["experiment"]
                     else f"{gain['paper']:+.2f}",
                     cell(r["reqa"]["mrr"]), cell(r["reqa"]["r@1"]), cell(r["reqa"]["r@5"]),
                     f"{_seeds(r['multireqa_seeds'])} / {_seeds(r['reqa_seeds'])}"])
    lines = [f"# {table['title']}", "",
             "Ours: the `sde_ade` sweep (all-MiniLM-L6-v2 towers standing in for T5 1.1, CPU "
             "profile: every description below says what it cuts), mean ± sample std over "
             "seeds, in %. P@1 / MRR on MultiReQA SQuAD test (the paper's pool); ReQA SQuAD dev "
             "beside it. ΔMRR vs ADE is the paper's Figure 3 measure, (MRR − MRR_ADE) / MRR_ADE. "
             "Paper: SDE/ADE paper Table 2, SQuAD (T5 1.1 base, batch 512, 20,000 steps); "
             "BERT-DE and USE-QA are its quoted baselines.", ""]
    lines += markdown_table(header, body)
    if table.get("run_files"):
        lines += ["", f"Per-run results (result.json without checkpoint paths, sweep.json, the "
                      f"evaluations on the other pool): `{table['run_files']}/`."]
    lines += ["", "Settings:", ""]
    lines += [f"- {r['name']} (`{r['experiment']}`): {r['description']}" for r in table["rows"]
              if r["description"]]
    return "\n".join(lines) + "\n"


def val_curve(run_dir: Path) -> list[dict]:
    """The validation rows of a run's CSV log (its latest version): step, val/mrr, val/r@1."""
    return [{"step": int(row["step"]) + 1, "val/mrr": round(float(row["val/mrr"]), 2),
             "val/r@1": round(float(row["val/r@1"]), 2)}
            for row in logged_rows(run_dir) if row.get("val/mrr")]


def budget_table(budget_dir: Path, sweep_runs: list[dict]) -> dict | None:
    """Step 5: the validation curve of each run under ``budget_dir``; the sweep's runs of the
    same experiments and seeds give their single point at the end of training."""
    runs = sorted(budget_dir.glob("*/*/result.json")) if budget_dir.is_dir() else []
    if not runs:
        return None
    rows = []
    for path in runs:
        report = json.loads(path.read_text(encoding="utf-8"))
        exp, seed = report["experiment"], report["seed"]
        base = next((r["report"] for r in sweep_runs if r["report"] is not None
                     and (r["report"]["experiment"], r["report"]["seed"]) == (exp, seed)), None)
        rows.append({"experiment": exp, "seed": seed, "run_dir": str(path.parent),
                     "steps": report.get("global_steps"),
                     "train_pairs": ((report.get("data") or {}).get("train") or {}).get("pairs"),
                     "curve": val_curve(path.parent),
                     "sweep_run_at_end": base and {
                         "steps": base.get("global_steps"),
                         **{k: (base.get("last_val") or {}).get(k) for k in ("val/mrr", "val/r@1")}}})
    return {"title": "Training budget: validation MRR along a 4x longer run", "rows": rows}


def render_budget(table: dict) -> str:
    lines = [f"# {table['title']}", "",
             "Validation: the profile's 500 questions held out of the SQuAD training pool "
             "(every sentence of their paragraphs as candidates). Each longer run (4x the "
             "steps and pairs of the CPU profile, its learning-rate schedule stretched to "
             "them) is validated every 125 steps of its epoch; 'sweep run' is the run of the "
             "sweep with the same experiment and seed (125 steps, validated once at its end).",
             ""]
    body = []
    for r in table["rows"]:
        end = r["sweep_run_at_end"]
        points = ", ".join(f"{c['step']}: {c['val/mrr']:.2f}" for c in r["curve"]) or "–"
        body.append([r["experiment"], str(r["seed"]), points,
                     "–" if not end or end["val/mrr"] is None
                     else f"{end['steps']}: {end['val/mrr']:.2f}"])
    lines += markdown_table(["experiment", "seed", "val MRR by step (longer run)",
                             "val MRR, sweep run"], body)
    return "\n".join(lines) + "\n"


def main(argv=None, rqa=run_rqa) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-train", action="store_true", help="tabulate the runs that are there")
    ap.add_argument("--sweep-dir", default=f"runs/sweeps/{SWEEP}")
    ap.add_argument("--results-dir", default="results/sde_ade")
    ap.add_argument("--pairs", type=int, default=400, help="QA pairs of the t-SNE (figure 2)")
    ap.add_argument("--budget-runs", default="runs/sde_ade_budget",
                    help="longer runs to tabulate as validation curves (step 5), if any")
    ap.add_argument("--pools", default="multireqa,reqa",
                    help="pools to evaluate each run on, of: " + ", ".join(POOLS))
    args = ap.parse_args(argv)
    pools = [p.strip() for p in args.pools.split(",") if p.strip()]
    unknown = sorted(set(pools) - set(POOLS))
    if unknown:  # before hours of training
        ap.error(f"--pools: unknown {unknown}; choose among {', '.join(POOLS)}")
    sweep_dir = Path(args.sweep_dir)
    if not args.no_train:
        rqa(["sweep", SWEEP, "--output-dir", sweep_dir.parent], cwd=ROOT)
    runs = load_sweep_runs(sweep_dir)
    evaluate_runs(runs, pools, rqa)
    out = Path(args.results_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = build_table(runs)
    # each run's result.json and evaluations beside the table: --sweep-dir
    # results/sde_ade/runs/sde_ade --no-train recomputes the table from them
    run_files = write_run_files(runs, sweep_dir, out, SWEEP,
                                extra=[f"{d}_{p}.json" for d, p, _ in POOLS.values()])
    if run_files:
        table["run_files"] = f"{RUN_FILES}/{SWEEP}"
    write_json(out / "table2.json", table)
    (out / "table2.md").write_text(render(table), encoding="utf-8")
    firsts = [(row["name"], row["run_dirs"][0]) for row in table["rows"] if row["run_dirs"]]
    if firsts:
        rqa(["analyze", "towers", *(a for name, d in firsts for a in
                                    ("--model", f"{name}={Path(d) / 'model'}")),
             "--dataset", POOLS["multireqa"][0], "--pool", POOLS["multireqa"][1],
             "--pairs", str(args.pairs), "--label", "sde_ade sweep, CPU profile, lowest seed",
             "--output-dir", out], cwd=ROOT)
    budget = budget_table(Path(args.budget_runs), runs)
    if budget:
        (out / "budget.json").write_text(json.dumps(budget, indent=2) + "\n", encoding="utf-8")
        (out / "budget.md").write_text(render_budget(budget), encoding="utf-8")
    print(render(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
