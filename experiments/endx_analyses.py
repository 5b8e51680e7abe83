"""The analyses of the ENDX paper, section 4.5 onwards (Table 4, Figure 2, Table 5, Figure 3,
Table 6, Figure 4), on the reduced CPU profile, written to runs/endx/ (``--results-dir``; the
published ones are in results/endx/, written with ``--results-dir results/endx``).

Plan (each step is skipped when it is finished, so an interrupted run resumes):

1. ``rqa train experiment=E profile=cpu seed=S`` for the dual and ENDX experiments of every
   family (default: gru and bert) and seed (finished when ``<runs>/E/cpu-seedS/`` holds a
   finished run of the step's settings: ``result.json`` and a ``config.yaml`` equal to the
   composed config, retrieval_qa/training/run_folder.py; an unfinished run resumes from its
   last.ckpt; a run of other settings there stops the script before anything runs);
2. the GAM ablation runs (default endx_gru without q|q, a|a, q|a, a|q, same seeds), each in
   its own output folder ``<runs>/endx_gru_ablation/wo_<term>``;
3. ``rqa analyze one-to-many`` (all families and seeds; Table 4, Figure 2), ``side-by-side``
   (the same runs' test metrics, validation scores and times), ``ablation``
   (Table 5), ``similarity`` and ``tsne`` per family on the first seed (Figures 3 and 4,
   ``figure3_<family>.*``), ``bertqa`` (Table 6; dual and ENDX of the bert family, all seeds).
   An analysis is finished when its output JSON exists and ``commands.json`` records the same
   command (``--force`` reruns analyses, never finished training).

The steps run on the one runner (retrieval_qa/sweeps/runner.py: finished steps skipped, a
step whose input failed passed over). Every command, its wall time and exit status go to
``<results-dir>/commands.{json,md}``.
Tables give mean ± sample std over seeds. Expect hours on 2 CPU cores (the BERT-family runs
and BERTQA dominate); ``--dry-run`` prints the plan with each step's status and runs nothing.

    python experiments/endx_analyses.py --dry-run
    python experiments/endx_analyses.py --seeds 42,43,44 --families gru,bert
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retrieval_qa.analysis.ablation import GAM_TERMS, TERM_LABELS  # noqa: E402
from retrieval_qa.config import load_yaml, model_defaults  # noqa: E402
from retrieval_qa.errors import UsageError  # noqa: E402
from retrieval_qa.portable_paths import portable  # noqa: E402
from retrieval_qa.sweeps import runner  # noqa: E402
from retrieval_qa.sweeps.runner import run_steps  # noqa: E402

FAMILIES = {  # family -> ((experiment, display name) of the dual encoder, of ENDX)
    "gru": (("dual_gru", "Dual-GRUs"), ("endx_gru", "ENDX-GRUs")),
    "bert": (("dual_bert", "Dual-BERTs"), ("endx_bert", "ENDX-BERTs")),
    "rnn": (("dual_rnn", "Dual-RNNs"), ("endx_rnn", "ENDX-RNNs")),
    "lstm": (("dual_lstm", "Dual-LSTMs"), ("endx_lstm", "ENDX-LSTMs")),
    "transformer": (("dual_transformer", "Dual-Transformers"),
                    ("endx_transformer", "ENDX-Transformers")),
}


@dataclass
class Step:
    key: str
    kind: str  # train | analyze
    args: list[str]
    output: Path  # result.json of a run, or the analysis's JSON
    needs: list[str] = field(default_factory=list)

    def command(self) -> str:
        return "rqa " + " ".join(shlex.quote(a) for a in self.args)


def _display(experiment: str) -> str:
    for dual, endx in FAMILIES.values():
        for exp, name in (dual, endx):
            if exp == experiment:
                return name
    return experiment


def build_plan(args) -> list[Step]:
    runs = Path(args.runs_dir)
    res = Path(args.results_dir)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    ab_seeds = ([int(s) for s in args.ablation_seeds.split(",") if s.strip()]
                if args.ablation_seeds else seeds)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise SystemExit(f"unknown famil(ies) {unknown}; choose from {sorted(FAMILIES)}")
    extra = [f"data.data_dir={args.data_dir}"] if args.data_dir else []
    family_overrides: dict[str, list[str]] = {}
    for spec in args.overrides:
        fam, sep, setting = spec.partition(":")
        if not sep or "=" not in setting or fam not in FAMILIES:
            raise SystemExit(f"--overrides {spec!r}: expected FAMILY:key=value with FAMILY in "
                             f"{sorted(FAMILIES)}")
        family_overrides.setdefault(fam, []).append(setting)
    exp_overrides = {exp: family_overrides.get(fam, [])
                     for fam, pair in FAMILIES.items() for exp, _ in pair}
    data = ["--dataset", args.dataset, "--pool", args.pool]
    data += ["--data-dir", args.data_dir] if args.data_dir else []
    out = ["--output-dir", str(res)]
    steps: list[Step] = []

    def run_dir(exp: str, seed: int, base: Path = runs) -> Path:
        return base / exp / f"{args.profile}-seed{seed}"

    def train(exp: str, seed: int, base: Path = runs, overrides=(), key: str | None = None):
        key = key or f"train/{exp}/seed{seed}"
        steps.append(Step(key, "train", ["train", f"experiment={exp}", f"profile={args.profile}",
                                         f"seed={seed}", f"output_dir={base}", *overrides,
                                         *exp_overrides[exp], *extra],
                          run_dir(exp, seed, base) / "result.json"))
        return key

    fam_runs: dict[str, dict[str, list[tuple[int, str]]]] = {}
    for fam in families:
        for exp, _ in FAMILIES[fam]:
            for seed in seeds:
                fam_runs.setdefault(fam, {}).setdefault(exp, []).append(
                    (seed, train(exp, seed)))
    ab_exp = args.ablation_experiment
    ab_keys: list[tuple[str, Path, str]] = []
    if ab_exp:
        for term in GAM_TERMS:
            base = runs / f"{ab_exp}_ablation" / f"wo_{term}"
            for seed in ab_seeds:
                key = train(ab_exp, seed, base, [f"model.gam.final.{term}=0"],
                            f"train/{ab_exp}_ablation/wo_{term}/seed{seed}")
                ab_keys.append((term, run_dir(ab_exp, seed, base), key))
        for seed in ab_seeds:  # the full ENDX and its dual baseline, if not trained above
            for exp in (ab_exp.replace("endx_", "dual_"), ab_exp):
                if not any(s.key == f"train/{exp}/seed{seed}" for s in steps):
                    train(exp, seed)

    def model_args(exps: list[str], which_seeds, flag: str = "--model",
                   leaf: str = "model") -> tuple[list[str], list[str]]:
        margs, needs = [], []
        for exp in exps:
            for seed in which_seeds:
                margs += [flag, f"{_display(exp)}={run_dir(exp, seed) / leaf}"]
                needs.append(f"train/{exp}/seed{seed}")
        return margs, needs

    all_exps = [exp for fam in families for exp, _ in FAMILIES[fam]]
    margs, needs = model_args(all_exps, seeds)
    steps.append(Step("analyze/one-to-many", "analyze",
                      ["analyze", "one-to-many", *margs, *data, *out, "--quiet"],
                      res / "table4.json", needs))
    rargs, _ = model_args(all_exps, seeds, "--report", "result.json")
    steps.append(Step("analyze/side-by-side", "analyze",
                      ["analyze", "side-by-side", *rargs, "--title",
                       f"Dual encoders vs ENDX ({args.profile} profile)", *out],
                      res / "side_by_side.json", needs))
    if ab_exp:
        dual_exp = ab_exp.replace("endx_", "dual_")
        rargs, rneeds = [], []
        for exp in (dual_exp, ab_exp):
            for seed in ab_seeds:
                rargs += ["--report", f"{_display(exp)}={run_dir(exp, seed) / 'result.json'}"]
                rneeds.append(f"train/{exp}/seed{seed}")
        for term, rd, key in ab_keys:
            label = f"w/o {TERM_LABELS[term]}"
            rargs += ["--report", f"{label}={rd / 'result.json'}"]
            rneeds.append(key)
        steps.append(Step("analyze/ablation", "analyze",
                          ["analyze", "ablation", *rargs, "--reference", _display(ab_exp),
                           "--title", f"Table 5: ablation of the GAM terms ({_display(ab_exp)}, "
                                      f"{args.profile} profile)", *out],
                          res / "table5.json", rneeds))
    first = seeds[0]
    for fam in families:
        (dual_exp, _), (endx_exp, _) = FAMILIES[fam]
        steps.append(Step(f"analyze/similarity/{fam}", "analyze",
                          ["analyze", "similarity", "--endx-run", str(run_dir(endx_exp, first)),
                           "--dual-model", str(run_dir(dual_exp, first) / "model"),
                           "--max-questions", str(args.similarity_questions), "--tag", fam,
                           *data, *out], res / f"figure3_{fam}.json",
                          [f"train/{endx_exp}/seed{first}", f"train/{dual_exp}/seed{first}"]))
        margs, needs = model_args([dual_exp, endx_exp], [first])
        steps.append(Step(f"analyze/tsne/{fam}", "analyze",
                          ["analyze", "tsne", *margs, "--questions", str(args.tsne_questions),
                           "--tag", fam, *data, *out], res / f"figure4_{fam}.json", needs))
    bq_fams = [f.strip() for f in args.bertqa_families.split(",") if f.strip()]
    bq_exps = [exp for fam in bq_fams if fam in families for exp, _ in FAMILIES[fam]]
    if bq_exps:
        margs, needs = model_args(bq_exps, seeds)
        steps.append(Step("analyze/bertqa", "analyze",
                          ["analyze", "bertqa", *margs, "--steps", str(args.bertqa_steps),
                           "--batch-size", str(args.bertqa_batch_size),
                           "--passages", str(args.bertqa_passages),
                           "--pairs", str(args.bertqa_pairs), "--seed", str(args.bertqa_seed),
                           *data, *out], res / "table6.json", needs))
    return steps


def _load_log(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def _write_log(res: Path, records: dict) -> None:
    """Merge ``records`` into the file's current ones: several invocations (e.g. ``--only``
    queues run side by side) can share one results folder."""
    res.mkdir(parents=True, exist_ok=True)
    log = {**_load_log(res / "commands.json"), **records}
    (res / "commands.json").write_text(json.dumps(log, indent=2) + "\n")
    lines = ["# Commands and times of the ENDX analyses", "",
             "| step | status | seconds | finished | command |", "|---|---|---|---|---|"]
    for key, rec in log.items():
        lines.append(f"| {key} | {rec.get('status')} | {rec.get('seconds', '–')} | "
                     f"{rec.get('finished', '–')} | `{rec['command']}` |")
    (res / "commands.md").write_text("\n".join(lines) + "\n")


def train_finished(step: Step) -> bool:
    """Whether the run folder of a train step holds a finished run of the step's settings;
    a run of other settings there is a SettingsMismatchError."""
    from retrieval_qa.training import run_folder
    from retrieval_qa.training.compose import compose

    cfg = compose(step.args[1:])
    return run_folder.finished(cfg, ROOT / run_folder.run_dir(cfg),
                               "delete that run folder to train it with the step's settings, "
                               "or give --runs-dir another folder")


def is_done(step: Step, log: dict, force: bool) -> bool:
    if step.kind == "train":
        return train_finished(step)
    if not (ROOT / step.output).is_file():
        return False
    rec = log.get(step.key)
    return not force and rec is not None and rec.get("command") == step.command() \
        and rec.get("status") == "ok"


class AnalysisStep(runner.Step):
    """A step of the plan on the one runner (retrieval_qa/sweeps/runner.py): skipped when
    done, passed over while a step it needs is not, its record in commands.json."""

    def __init__(self, step: Step, status: dict, res: Path, ran: list, failed: list,
                 blocked: list) -> None:
        self.step, self.status, self.res = step, status, res
        self.ran, self.failed, self.blocked = ran, failed, blocked
        self.name = step.key

    def done(self) -> bool:
        s = self.step
        if s.kind == "train" and train_finished(s):
            self.status[s.key] = "done"  # also when a queue beside this one finished it
        return self.status[s.key] == "done"

    def ready(self) -> str | None:
        missing = [n for n in self.step.needs if self.status.get(n) != "done"]
        if not missing:
            return None
        self.blocked.append({"key": self.step.key, "waiting_for": missing})
        print(f"skip {self.step.key}: waiting for {missing}", file=sys.stderr)
        return f"waiting for {missing}"

    def start(self) -> runner.Process:
        print(f"$ {self.step.command()}", file=sys.stderr, flush=True)
        return runner.Process([runner.Action([sys.executable, "-m", "retrieval_qa.cli",
                                              *self.step.args])],
                              cwd=ROOT, stdout="inherit", new_session=False)

    def end(self, job: runner.Process, record: runner.Record) -> None:
        s = self.step
        ok = job.code == 0 and (ROOT / s.output).is_file()
        _write_log(self.res, {s.key: {"command": s.command(),
                                      "status": "ok" if ok else f"failed ({job.code})",
                                      "seconds": record.seconds,
                                      "finished": time.strftime("%Y-%m-%d %H:%M:%S")}})
        self.status[s.key] = "done" if ok else "failed"
        (self.ran if ok else self.failed).append(s.key)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="42,43,44", help="training seeds (default 42,43,44)")
    ap.add_argument("--families", default="gru,bert",
                    help=f"comma-separated, from {sorted(FAMILIES)} (default gru,bert)")
    ap.add_argument("--profile", default="cpu", help="experiment profile (default cpu)")
    ap.add_argument("--ablation-experiment", default="endx_gru",
                    help="ENDX experiment of Table 5 ('' to skip; default endx_gru)")
    ap.add_argument("--ablation-seeds", default=None, help="default: --seeds")
    ap.add_argument("--bertqa-families", default="bert", help="dual/ENDX rows of Table 6")
    # the defaults of Table 6: conf/model/cross_classifier.yaml and conf/tables/endx_table6.yaml
    classifier, table6 = model_defaults("cross_classifier"), load_yaml("tables/endx_table6.yaml")
    ap.add_argument("--bertqa-steps", type=int, default=classifier["training"]["steps"])
    ap.add_argument("--bertqa-batch-size", type=int,
                    default=classifier["training"]["batch_size"])
    ap.add_argument("--bertqa-passages", type=int, default=table6.sample.passages)
    ap.add_argument("--bertqa-pairs", type=int, default=table6.sample.qa_pairs)
    ap.add_argument("--bertqa-seed", type=int, default=0)
    ap.add_argument("--similarity-questions", type=int, default=10)
    ap.add_argument("--tsne-questions", type=int, default=6)
    ap.add_argument("--dataset", default="reqa_squad")
    ap.add_argument("--pool", default="dev", help="evaluation pool of the analyses")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--runs-dir", default="runs", help="output_dir of rqa train (default runs)")
    ap.add_argument("--results-dir", default="runs/endx",
                    help="where tables, figures and commands.md go (default runs/endx; the "
                         "published study: results/endx)")
    ap.add_argument("--only", default=None,
                    help="comma-separated step-key prefixes to run (e.g. train/dual_gru,"
                         "analyze/tsne)")
    ap.add_argument("--overrides", action="append", default=[], metavar="FAMILY:KEY=VALUE",
                    help="extra training setting for one family's dual and ENDX runs "
                         "(repeatable), e.g. bert:data.max_train_pairs=4000")
    ap.add_argument("--force", action="store_true", help="rerun finished analyses")
    ap.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    steps = build_plan(args)
    res = ROOT / args.results_dir
    log = _load_log(res / "commands.json")
    only = [p for p in (args.only or "").split(",") if p]
    selected = [s for s in steps if not only or any(s.key.startswith(p) for p in only)]
    status, clashes = {}, []
    for s in steps:
        try:
            status[s.key] = "done" if is_done(s, log, args.force) else "todo"
        except UsageError as e:  # a run of other settings, or an unreadable config.yaml
            status[s.key] = "other settings"
            clashes += [str(e)] if s in selected else []
    if args.dry_run:
        for s in selected:
            print(f"[{status[s.key]}] {s.key}: {s.command()}")
        todo = [s for s in selected if status[s.key] == "todo"]
        print(json.dumps({"dry_run": True, "steps": len(selected), "todo": len(todo),
                          "done": sum(status[s.key] == "done" for s in selected),
                          "other_settings": len(clashes), "results_dir": portable(str(res)),
                          "plan": [{"key": s.key, "status": status[s.key],
                                    "command": s.command(), "output": str(s.output)}
                                   for s in selected]}))
        return 0
    if clashes:
        print("endx_analyses: error: " + "; ".join(clashes) + "; nothing was run",
              file=sys.stderr)
        return 2
    found = {}
    for s in steps:  # runs finished before this script (or by an earlier call): their times
        if s.kind == "train" and status[s.key] == "done" and s.key not in log:
            report = json.loads((ROOT / s.output).read_text())
            found[s.key] = {"command": s.command(), "status": "ok (found)",
                            "seconds": report.get("seconds"), "finished": "earlier"}
    if found:
        _write_log(res, found)
    start = time.perf_counter()
    ran, failed, blocked = [], [], []
    run_steps([AnalysisStep(s, status, res, ran, failed, blocked) for s in selected])
    print(json.dumps({"ran": ran, "failed": failed, "blocked": blocked,
                      "results_dir": portable(str(res)),
                      "commands": portable(str(res / "commands.md")),
                      "seconds": round(time.perf_counter() - start, 1)}))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
