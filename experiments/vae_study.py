"""Dual-GRUs vs Dual-VAEs vs Cross-VAEs side by side (Cross-VAEs paper, Tables 2
and 3): the same data, profile, steps and seeds for the three rows, on the ReQA SQuAD dev pool
and its one-to-many subset (answers with more than 8 questions: ``--min-questions-per-answer
9``), with MRR, R@1, R@5 and the SSE of the subset's question embeddings. The Dual-GRUs row is
the ``dual_gru`` experiment (the ENDX paper's settings): besides having no latent model it
shares one tower between questions and answers, scores by the inner product and trains with the
in-batch softmax, where the VAEs have separate encoders, the cosine of the latent means and
eq. 7 (results/vaes/NOTES.md, "Departures").

Plan (each step is skipped when finished, so an interrupted study resumes with the same
command):

1. ``rqa train experiment=E profile=P seed=S output_dir=RUNS threads=T [overrides]`` for every
   row and seed; finished when ``RUNS/E/P-seedS/result.json`` exists (a run stopped half-way
   resumes from its ``last.ckpt``: ``resume=auto``). Each run tests its best checkpoint on the
   dev pool (the profile's ``test_after_fit``).
2. ``rqa evaluate --checkpoint <its export> --dataset reqa_squad --pool dev
   --min-questions-per-answer 9 --quiet``; finished when ``RUNS/E/P-seedS/subset.json``
   exists.
3. ``table.json`` and ``table.md`` in ``--results-dir`` (default ``results/vaes``): mean and
   sample standard deviation over seeds per row, the paper's numbers beside them, every command
   with its wall time, the machine, and the profile's description (its reductions).

A finished run whose settings differ from the ones asked for (its ``config.yaml`` against the
composed config, as ``rqa train`` compares them: another ``trainer.max_steps``, say) is an
error, never silently reused: delete its folder or pass another ``--runs``.

    python experiments/vae_study.py [--seeds 1,2,3] [--profile cpu] [--threads 1]
        [--overrides "trainer.max_steps=120"] [--runs runs/vaes] [--results-dir results/vaes]
        [--dry-run]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from retrieval_qa.errors import UsageError  # noqa: E402
from retrieval_qa.runtime import machine_info, run_rqa  # noqa: E402
from retrieval_qa.training import run_folder  # noqa: E402
from retrieval_qa.training.compose import compose  # noqa: E402

ROWS = (  # (display name, experiment)
    ("Dual-GRUs", "dual_gru"),
    ("Dual-VAEs", "dual_vae"),
    ("Cross-VAEs", "cross_vae"),
)
MIN_QUESTIONS = 9  # "answers with more than 8 questions" (Cross-VAEs Table 3)
FULL = ("mrr", "r@1", "r@5")
SUBSET = ("mrr", "r@1", "r@5", "sse")
# Cross-VAEs paper: Table 2 (SQuAD, MRR / R@1 / R@5) and Table 3 (answers with more than 8
# questions, MRR / R@1 / R@5 / SSE; only Cross-VAEs among these rows). ENDX paper, Table 2:
# its own Dual-GRUs (the project's dual_gru experiment follows the ENDX settings).
PAPER = {
    "Dual-GRUs": {"table2": {"mrr": 61.06, "r@1": 54.70, "r@5": 68.25},
                  "table3": None,
                  "endx_table2": {"mrr": 55.24, "r@1": 44.39, "r@5": 68.00}},
    "Dual-VAEs": {"table2": {"mrr": 61.48, "r@1": 55.01, "r@5": 68.49}, "table3": None},
    "Cross-VAEs": {"table2": {"mrr": 62.29, "r@1": 55.60, "r@5": 70.05},
                   "table3": {"mrr": 48.52, "r@1": 44.55, "r@5": 53.52, "sse": 0.09}},
}

Runner = Callable[[list[str]], dict]


def rqa_subprocess(args: list[str]) -> dict:
    """``rqa ARGS`` in a subprocess from the repository root; its JSON (last stdout line)."""
    return run_rqa(args, cwd=ROOT)


def stats(values: list[float]) -> dict:
    """Mean, sample std (0 for one value), min, max, n."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"mean": None, "std": None, "min": None, "max": None, "n": 0}
    return {"mean": round(statistics.fmean(vals), 4),
            "std": round(statistics.stdev(vals), 4) if len(vals) > 1 else 0.0,
            "min": round(min(vals), 4), "max": round(max(vals), 4), "n": len(vals)}


class Study:
    def __init__(self, args, rqa: Runner) -> None:
        self.args, self.rqa = args, rqa
        self.seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
        self.overrides = shlex.split(args.overrides)
        self.runs = Path(args.runs)
        self.results = Path(args.results_dir)
        self.commands: list[dict] = []

    def run_dir(self, experiment: str, seed: int) -> Path:
        return self.runs / experiment / f"{self.args.profile}-seed{seed}"

    def train_args(self, experiment: str, seed: int) -> list[str]:
        return ["train", f"experiment={experiment}", f"profile={self.args.profile}",
                f"seed={seed}", f"output_dir={self.runs}", f"threads={self.args.threads}",
                "test_after_fit=true", *self.overrides]

    def finished(self, experiment: str, seed: int) -> bool:
        """Whether the run folder holds a finished run of this study's settings (``rqa
        train``'s own check: its config.yaml equals the composed config); a run of other
        settings stops the study."""
        cfg = compose(self.train_args(experiment, seed)[1:])
        try:
            return run_folder.finished(cfg, self.run_dir(experiment, seed),
                                       "delete its folder or use another --runs")
        except UsageError as e:
            raise SystemExit(str(e)) from e

    @staticmethod
    def subset_args(checkpoint: str) -> list[str]:
        return ["evaluate", "--checkpoint", checkpoint, "--dataset", "reqa_squad", "--pool",
                "dev", "--min-questions-per-answer", str(MIN_QUESTIONS), "--quiet"]

    def _call(self, key: str, args: list[str], output: Path) -> dict:
        t0 = time.time()
        out = self.rqa(args)
        seconds = round(time.time() - t0, 1)
        self.commands.append({"key": key, "command": "rqa " + " ".join(
            shlex.quote(a) for a in args), "seconds": seconds, "status": "computed",
            "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")})
        if not output.is_file():  # `rqa train` writes result.json itself
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(json.dumps(out, indent=2))
        return json.loads(output.read_text())

    def one(self, name: str, experiment: str, seed: int) -> dict:
        folder = self.run_dir(experiment, seed)
        result_path, subset_path = folder / "result.json", folder / "subset.json"
        key = f"{experiment}/seed{seed}"
        if self.finished(experiment, seed):
            result = json.loads(result_path.read_text())
            self.commands.append({"key": key, "command": "rqa " + " ".join(
                shlex.quote(a) for a in self.train_args(experiment, seed)),
                "seconds": result.get("seconds"), "status": "finished earlier"})
        else:
            result = self._call(key, self.train_args(experiment, seed), result_path)
        if "test" not in result:
            raise SystemExit(f"{result_path} has no test metrics (test_after_fit was off)")
        checkpoint = result["checkpoint"]
        if subset_path.is_file():
            subset = json.loads(subset_path.read_text())
            self.commands.append({"key": f"{key}/subset", "command": "rqa " + " ".join(
                self.subset_args(checkpoint)), "seconds": subset.get("seconds"),
                "status": "finished earlier"})
        else:
            subset = self._call(f"{key}/subset", self.subset_args(checkpoint), subset_path)
        return {"name": name, "experiment": experiment, "seed": seed,
                "folder": str(folder), "checkpoint": checkpoint,
                "test": {m: result["test"]["metrics"][m] for m in FULL},
                "test_questions": result["test"].get("questions"),
                "subset": {**{m: subset["metrics"][m] for m in FULL}, "sse": subset.get("sse")},
                "subset_questions": subset.get("questions"),
                "sse_pairs": subset.get("sse_pairs"), "sse_answers": subset.get("sse_answers"),
                "best_val": result.get("best_val_score"),
                "train_seconds": result.get("seconds"), "subset_seconds": subset.get("seconds"),
                "steps": result.get("global_steps"),
                "train_pairs": ((result.get("data") or {}).get("train") or {}).get("pairs"),
                "description": result.get("description"),
                "pretrained": result.get("pretrained")}

    def plan(self) -> list[tuple[str, str, int]]:
        return [(name, exp, seed) for seed in self.seeds for name, exp in ROWS]

    def dry_run(self) -> None:
        for name, exp, seed in self.plan():
            folder = self.run_dir(exp, seed)
            state = "finished" if self.finished(exp, seed) else "to run"
            sub = "finished" if (folder / "subset.json").is_file() else "to run"
            print(f"{name:<11} seed {seed}: train {state:<8} subset {sub:<8} $ rqa "
                  + " ".join(self.train_args(exp, seed)))

    def run(self) -> dict:
        start = time.time()
        runs = [self.one(*step) for step in self.plan()]
        table = self.aggregate(runs)
        table["wall_seconds_this_invocation"] = round(time.time() - start, 1)
        self.results.mkdir(parents=True, exist_ok=True)
        (self.results / "table.json").write_text(json.dumps(table, indent=2) + "\n")
        (self.results / "table.md").write_text(render(table))
        return table

    def aggregate(self, runs: list[dict]) -> dict:
        rows = []
        for name, exp in ROWS:
            mine = [r for r in runs if r["experiment"] == exp]
            rows.append({
                "name": name, "experiment": exp, "seeds": [r["seed"] for r in mine],
                "test": {m: stats([r["test"][m] for r in mine]) for m in FULL},
                "subset": {m: stats([r["subset"][m] for r in mine]) for m in SUBSET},
                "best_val": stats([r["best_val"] for r in mine]),
                "train_seconds": stats([r["train_seconds"] for r in mine]),
                "subset_seconds": stats([r["subset_seconds"] for r in mine]),
                "steps": sorted({r["steps"] for r in mine}),
                "train_pairs": sorted({r["train_pairs"] for r in mine if r["train_pairs"]}),
                "test_questions": sorted({r["test_questions"] for r in mine}),
                "subset_questions": sorted({r["subset_questions"] for r in mine}),
                "sse_pairs": sorted({r["sse_pairs"] for r in mine if r["sse_pairs"]}),
                "description": mine[0]["description"] if mine else None,
                "pretrained": mine[0]["pretrained"] if mine else None,
                "paper": PAPER[name]})
        by = {r["name"]: r for r in rows}
        diff = {}
        if by["Cross-VAEs"]["test"]["mrr"]["n"] and by["Dual-VAEs"]["test"]["mrr"]["n"]:
            per_seed = {r["seed"]: r for r in runs if r["experiment"] == "dual_vae"}
            paired = [r["test"]["mrr"] - per_seed[r["seed"]]["test"]["mrr"]
                      for r in runs if r["experiment"] == "cross_vae" and r["seed"] in per_seed]
            paired_sub = [r["subset"]["mrr"] - per_seed[r["seed"]]["subset"]["mrr"]
                          for r in runs if r["experiment"] == "cross_vae"
                          and r["seed"] in per_seed]
            diff = {"cross_minus_dual_vae_mrr": stats(paired),
                    "cross_minus_dual_vae_subset_mrr": stats(paired_sub),
                    "pairing": "by seed (same seed: same training order and subset)"}
        return {
            "title": "Dual-GRUs vs Dual-VAEs vs Cross-VAEs",
            "profile": self.args.profile, "overrides": self.overrides,
            "seeds": self.seeds, "threads": self.args.threads,
            "test_pool": "reqa_squad/dev",
            "subset": f"reqa_squad/dev, questions whose answer sentence has at least "
                      f"{MIN_QUESTIONS} questions (the paper's 'more than 8'); the candidate "
                      "pool is unchanged",
            "sse_definition": "mean over question pairs sharing an answer of "
                              "||q_i/|q_i| - q_j/|q_j|||^2 (retrieval_qa/evaluation/sse.py)",
            "machine": machine_info(self.args.threads),
            "rows": rows, "comparison": diff, "runs": runs, "commands": self.commands,
            "command": "python experiments/vae_study.py " + " ".join(
                shlex.quote(a) for a in (self.args.argv or [])),
            "written": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}


def _cell(s: dict, digits: int = 2) -> str:
    if not s or s.get("mean") is None:
        return "–"
    return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}"


def _paper(p: dict | None, keys) -> str:
    if not p:
        return "–"
    return " / ".join(f"{p[k]:.2f}" for k in keys)


def render(table: dict) -> str:
    over = " ".join(table["overrides"]) or "none"
    lines = [f"# {table['title']}", "",
             f"Profile `{table['profile']}` (overrides for every row: `{over}`), seeds "
             f"{', '.join(map(str, table['seeds']))}, {table['threads']} torch thread(s). "
             "Cells: mean ± sample std over the seeds, percentages (SSE: squared distance). "
             f"Full pool: {table['test_pool']} (each run's post-training test, 10,539 "
             f"questions, 10,250 candidates). Subset: {table['subset']}. SSE: "
             f"{table['sse_definition']}. The paper columns are the Cross-VAEs paper's "
             "(Table 2 full SQuAD, Table 3 the subset), trained at full scale: our rows are a "
             "reduced profile, see the settings below.", "",
             "| method | MRR | R@1 | R@5 | subset MRR | subset R@1 | subset R@5 | subset SSE "
             "| best val R@1 | train s | paper Table 2 | paper Table 3 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table["rows"]:
        t, s = r["test"], r["subset"]
        lines.append(
            f"| {r['name']} | {_cell(t['mrr'])} | {_cell(t['r@1'])} | {_cell(t['r@5'])} "
            f"| {_cell(s['mrr'])} | {_cell(s['r@1'])} | {_cell(s['r@5'])} "
            f"| {_cell(s['sse'], 3)} | {_cell(r['best_val'])} | {_cell(r['train_seconds'], 0)} "
            f"| {_paper(r['paper']['table2'], FULL)} | {_paper(r['paper']['table3'], SUBSET)} |")
    comp = table.get("comparison") or {}
    if comp:
        d, ds = comp["cross_minus_dual_vae_mrr"], comp["cross_minus_dual_vae_subset_mrr"]
        lines += ["", f"Cross-VAEs minus Dual-VAEs, paired by seed: MRR {_cell(d)} (full pool), "
                  f"{_cell(ds)} (subset); per seed: "
                  + ", ".join(f"{v:+.2f}" for v in _paired(table, "test")) + " (full), "
                  + ", ".join(f"{v:+.2f}" for v in _paired(table, "subset")) + " (subset)."]
    gru = next(r for r in table["rows"] if r["name"] == "Dual-GRUs")
    lines += ["", "Paper numbers: Cross-VAEs paper Table 2 (Dual-GRUs 61.06 / 54.70 / 68.25 "
              "there; the ENDX paper's Dual-GRUs, whose settings our dual_gru follows, "
              f"{_paper(gru['paper']['endx_table2'], FULL)}); Table 3 gives the subset only "
              "for Cross-VAEs (48.52 / 44.55 / 53.52, SSE 0.09; USE-QA 47.06 / 40.90 / 53.44 / "
              "0.14, BERTQA 37.90 / 30.81 / 45.24 / 0.23).", "", "Settings:", ""]
    for r in table["rows"]:
        lines.append(f"- {r['name']} (`{r['experiment']}`): {r['description']}. Encoder: "
                     f"{r['pretrained']}. Steps {', '.join(map(str, r['steps']))}; training "
                     f"pairs {', '.join(map(str, r['train_pairs']))}; subset questions "
                     f"{', '.join(map(str, r['subset_questions']))}, SSE pairs "
                     f"{', '.join(map(str, r['sse_pairs']))}.")
    m = table["machine"]
    lines += ["", f"Machine: {m['cpu']}, {m['cores']} cores (shared with other jobs), "
              f"{m['torch_threads']} torch thread(s), torch {m['torch']}, Python {m['python']}. "
              "Times are wall seconds of `rqa train` (training, validation, export and the "
              "dev-pool test) and depend on the load of the shared machine.", "",
              f"Reproduce: `{table['command']}` (resumable: finished runs are skipped).", "",
              "| run | command | s | status |", "|---|---|---|---|"]
    for c in table["commands"]:
        sec = f"{c['seconds']:.0f}" if isinstance(c.get("seconds"), (int, float)) else "–"
        lines.append(f"| {c['key']} | `{c['command']}` | {sec} | {c['status']} |")
    return "\n".join(lines) + "\n"


def _paired(table: dict, part: str) -> list[float]:
    runs = table["runs"]
    dual = {r["seed"]: r for r in runs if r["experiment"] == "dual_vae"}
    return [r[part]["mrr"] - dual[r["seed"]][part]["mrr"] for r in runs
            if r["experiment"] == "cross_vae" and r["seed"] in dual]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads per run (default 1: the shared 2-core machine)")
    ap.add_argument("--overrides", default="",
                    help="`rqa train` overrides for every row, e.g. trainer.max_steps=120")
    ap.add_argument("--runs", default="runs/vaes", help="output_dir of the runs (git-ignored)")
    ap.add_argument("--results-dir", default="results/vaes")
    ap.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    args = ap.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return args


def main(argv=None, rqa: Runner | None = None) -> int:
    args = parse_args(argv)
    study = Study(args, rqa or rqa_subprocess)
    if args.dry_run:
        study.dry_run()
        return 0
    table = study.run()
    print(render(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
