"""Reproduce the ENDX paper's Table 2 (ReQA SQuAD) on both evaluation pools (dev and train),
beside the paper's numbers and beside this repository's committed reference results.

Everything is written into a run folder of yours (default ``runs/table2/``, git-ignored), never
into the tracked ``results/``: ``table2.md``, one ``<row>-<pool>.json`` per finished row (with
its settings and timings) and its per-question ``.run.jsonl``. The committed reference results
are read, not written, so the table shows whether you reproduced our numbers: a row's
``results/table2/<row>-<pool>.json`` (the same settings, seed 42), else the seed mean on today's
pools that its ``reference:`` in ``conf/tables/endx_table2.yaml`` names (per-question records
or a sweep table's row; its source says its seeds and training pairs, and how its settings
differ from the profile's when they do).

Rows: ``quick`` (the default: BM25 on both pools and Dual-GRUs, about 10 minutes on a 2-core
laptop), ``all``, or a comma-separated list of row names. Every row of the table says whether
it was computed now, resumed (training continued from an interrupted run's checkpoint), model
reused (an earlier finished training of the same settings evaluated now), reused (an earlier
result in the run folder, not recomputed) or not run. ``--force`` recomputes the selected rows
only; the other rows' saved results are kept and shown. Quoted rows and rows whose method does
not exist yet are listed as such, never faked.

A saved result is reused only under the settings it was computed with: each ``<row>-<pool>.json``
records them (the ``rqa`` arguments, the BM25 settings of conf/model/bm25.yaml), and a trained
row's run folder must hold a run of the config its arguments compose to now (``rqa train``'s
own check, retrieval_qa/training/run_folder.py). A selected row saved under other settings
stops the script before anything runs (exit status 2; ``--force`` recomputes it, ``--out``
gives another folder); an unselected one is not shown. A result saved by an earlier version,
without its settings, is recomputed when selected and not shown otherwise.

    python experiments/reproduce_table2.py [--rows quick|all|NAMES] [--force] [--out DIR]
        [--profile cpu|gpu|paper] [--pools dev,train] [--jobs N]
        [--train-overrides "key=value ..."]

The table's Markdown is experiments/table2_report.py's; which rows run,
experiments/table2_rows.py's.

Profiles: ``cpu`` (default, reduced for a 2-core laptop), ``gpu`` (each experiment's ``gpu``
profile in ``conf/experiment/*.yaml``: larger than the CPU profile, smaller than the paper;
bf16-mixed through the trainer's ``precision: auto``), ``paper`` (the paper's settings). Each trained row's
profile description (what it reduces) is printed before the run and written under the table;
rows whose experiment has no such profile are listed as such, not run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import shlex
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: its helpers beside it, as experiments.*
    sys.path.insert(0, str(ROOT))

# the table's Markdown and the rows' selection, beside this script (re-exported for tests)
from experiments.table2_report import (  # noqa: E402,F401
    METRICS,
    STATUS_TEXT,
    _compare,
    _triple,
    render,
)
from experiments.table2_rows import (  # noqa: E402,F401
    QUICK,
    profile_block,
    reductions,
    select_rows,
)
from retrieval_qa.config import conf_dir, load_yaml, plain  # noqa: E402
from retrieval_qa.errors import SettingsMismatchError, UsageError  # noqa: E402
from retrieval_qa.portable_paths import portable  # noqa: E402
from retrieval_qa.runtime import run_rqa  # noqa: E402
from retrieval_qa.written import read_json_or_refuse, write_text  # noqa: E402

FORCE_FIX = "delete it, or give --force with that row, to compute it again"
REFERENCE = ROOT / "results" / "table2"


def _rqa(*args: str) -> dict:
    """`rqa ARGS` in a subprocess; its JSON (last line of stdout)."""
    return run_rqa(args)


def runner():
    """The function that runs `rqa`; RQA_TABLE2_RUNNER=module:function replaces it (tests)."""
    spec = os.environ.get("RQA_TABLE2_RUNNER")
    if not spec:
        return _rqa
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def slug(name: str) -> str:
    return name.replace(" ", "_")


def train_overrides(row, profile: str, out: Path, extra: list[str]) -> list[str]:
    """The `rqa train` overrides of a trained row (its model: out/runs/<experiment>/...)."""
    return [f"experiment={row.experiment}", f"profile={profile}", f"output_dir={out / 'runs'}",
            "test_after_fit=false", *extra]


def row_settings(row, pool: str, profile: str, extra: list[str]) -> dict:
    """What determines a row's result on ``pool``: the `rqa` arguments that compute it (the
    run folder's path aside) and, for BM25, the settings of conf/model/bm25.yaml. Recorded in
    the row's JSON and compared before it is reused."""
    evaluate = ["--dataset", "reqa_squad", "--pool", pool]
    if row.kind == "bm25":
        return {"evaluate": ["--model", "bm25", *evaluate],
                "bm25": plain(load_yaml("model/bm25.yaml"))}
    return {"train": [o for o in train_overrides(row, profile, Path(), extra)
                      if not o.startswith("output_dir=")], "evaluate": evaluate}


def model_finished(row, profile: str, out: Path, extra: list[str]) -> bool:
    """Whether the row's run folder holds a finished training of the config its overrides
    compose to now; a run of other settings there is a SettingsMismatchError."""
    from retrieval_qa.training import run_folder
    from retrieval_qa.training.compose import compose

    return run_folder.finished(compose(train_overrides(row, profile, out, extra)),
                               fix=f"--force (FORCE=1) to train {row.name} again, or --out DIR "
                                   "(OUT=DIR) for another folder")


def train_row(row, profile: str, out: Path, force: bool, extra: list[str], rqa
              ) -> tuple[dict, str]:
    """The trained model of a row: an earlier finished training of the same settings
    (reused), or trained now (resumed from an interrupted run's checkpoint by `rqa train`)."""
    saved = out / f"{slug(row.name)}-train.json"
    if not force and saved.is_file() and model_finished(row, profile, out, extra):
        return read_json_or_refuse(saved, "saved training report", FORCE_FIX,
                                   required=("checkpoint",)), "model reused"
    report = rqa("train", *train_overrides(row, profile, out, extra),
                 *(["resume=never"] if force else []))
    report = portable(report)
    write_text(saved, json.dumps(report, indent=2))
    status = "model reused" if report.get("reused") else \
        "resumed" if report.get("resumed_from") else "computed"
    return report, status


def run_row(row, pool: str, profile: str, out: Path, force: bool, extra: list[str],
            trained: dict, rqa) -> tuple[dict, str]:
    """Compute one (row, pool); returns the result and its status."""
    run_file = str(out / f"{slug(row.name)}-{pool}.run.jsonl")
    settings = row_settings(row, pool, profile, extra)
    if row.kind == "bm25":
        result = rqa("evaluate", *settings["evaluate"], "--run-file", run_file, "--quiet")
        return result, "computed"
    if row.kind == "train":
        if not (conf_dir() / "experiment" / f"{row.experiment}.yaml").is_file():
            return {"not_run": f"experiment {row.experiment!r} is not implemented yet"}, "not run"
        if row.experiment not in trained:
            trained[row.experiment] = train_row(row, profile, out, force, extra, rqa)
        report, status = trained[row.experiment]
        ckpt = report["checkpoint"]
        if not Path(ckpt).is_absolute() and not Path(ckpt).exists():
            ckpt = str(ROOT / ckpt)
        result = rqa("evaluate", "--checkpoint", ckpt, *settings["evaluate"],
                     "--run-file", run_file, "--quiet")
        return {**result, "training": report}, status
    return {"not_run": "quoted from the paper; the model is not available offline"}, "quoted"


def saved_state(row, pool: str, saved: dict, profile: str, out: Path, extra: list[str]) -> str:
    """A saved row result: "reused" when it records this command's settings (and a trained
    row's run folder, when there, holds a run of them), "unrecorded" when it records none (an
    earlier version's); other settings raise a SettingsMismatchError naming them."""
    from retrieval_qa.training.run_folder import describe

    recorded = (saved.get("reproduced") or {}).get("settings")
    if recorded is None:
        return "unrecorded"
    wanted = row_settings(row, pool, profile, extra)
    diffs = {k: (recorded.get(k), wanted.get(k)) for k in {*recorded, *wanted}
             if recorded.get(k) != wanted.get(k)}
    if diffs:
        raise SettingsMismatchError(out, diffs, f"{row.name} on {pool}: its result in {out} "
                                    f"was computed with other settings ({describe(diffs)})")
    if row.kind == "train":
        model_finished(row, profile, out, extra)  # raises when the folder's run differs
    return "reused"


def references(table) -> dict:
    """The committed reference results: results/table2/<row>-<pool>.json (the same settings),
    else the seed mean that the row's ``reference:`` in conf/tables/endx_table2.yaml names
    (retrieval_qa/analysis/references.py), with ``differs`` when its settings are not the
    cpu profile's. A declared reference whose file is missing is left out, said on stderr."""
    from retrieval_qa.analysis.references import table_references

    refs: dict = {}
    for row in table.rows:
        for pool in table.pools:
            path = REFERENCE / f"{slug(row.name)}-{pool}.json"
            if path.is_file():
                data = json.loads(path.read_text())
                if "metrics" in data:
                    refs[(row.name, pool)] = {
                        "metrics": data["metrics"],
                        "source": str(path.relative_to(ROOT)),
                        "profile": (data.get("training") or {}).get("profile")}

    def missing(name: str, path: str) -> None:
        print(f"[{name}] its committed reference {path} is missing: shown without one",
              file=sys.stderr)

    seeds = table_references(table, ROOT / "results", "conf/tables/endx_table2.yaml", missing)
    for key, ref in seeds.items():
        refs.setdefault(key, {"metrics": ref.metrics, "std": ref.std, "source": ref.path,
                              "about": ref.about(), "profile": ref.profile,
                              "differs": ref.differs})
    return refs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="cpu", choices=["cpu", "gpu", "paper"])
    ap.add_argument("--rows", default="quick", help="quick (default), all, or row names")
    ap.add_argument("--pools", default=None, help="comma-separated pools (default: dev,train)")
    ap.add_argument("--force", action="store_true",
                    help="recompute the selected rows (the others' results are kept)")
    ap.add_argument("--out", default=str(ROOT / "runs" / "table2"),
                    help="run folder for this run's results (default runs/table2)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="rows computed at once (default 1; on a GPU the small rows leave it "
                         "mostly idle, and several share it)")
    ap.add_argument("--train-overrides", default="",
                    help="extra `rqa train` overrides for trained rows, e.g. trainer.max_steps=50")
    args = ap.parse_args(argv)
    table = load_yaml("tables/endx_table2.yaml")
    if args.pools:
        table.pools = args.pools.split(",")
    wanted, selection = select_rows(table, args.rows, args.profile)
    reduced = reductions(table, wanted, args.profile)
    for name, description in reduced.items():
        print(f"[{name}] profile {args.profile}: {description}", file=sys.stderr, flush=True)
    if args.train_overrides:
        print(f"trained rows also take: {args.train_overrides}", file=sys.stderr, flush=True)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    extra = shlex.split(args.train_overrides)
    refs = references(table)
    rqa = runner()
    entries: list[dict] = []
    todo: dict[str, list[dict]] = {}  # row name -> its entries to compute, in table order
    clashes: list[str] = []  # selected rows saved under other settings
    start = time.time()
    for row in table.rows:
        pools = {"quoted": ["–"], "train": [p for p in table.pools if p in table.trained_pools]}
        for pool in pools.get(row.kind, table.pools):
            entry = {"row": row.name, "pool": pool, "paper": dict(row.paper), "seconds": None,
                     "reference": refs.get((row.name, pool)), "result": None}
            entries.append(entry)
            if row.kind == "quoted":
                entry.update(status="quoted", result={"not_run": "quoted from the paper; the "
                                                      "model is not available offline"})
                continue
            path = out / f"{slug(row.name)}-{pool}.json"
            selected = row.name in wanted
            if path.is_file() and not (args.force and selected):
                saved = read_json_or_refuse(path, "saved result", FORCE_FIX)
                try:
                    state = saved_state(row, pool, saved, args.profile, out, extra)
                except SettingsMismatchError as e:
                    if selected:
                        clashes.append(str(e))
                        continue
                    state = "other settings"
                if state == "reused":
                    entry.update(status="reused", result=saved)
                    print(f"[{row.name} {pool}] reused {portable(str(path))}", file=sys.stderr)
                    continue
                if not selected:
                    entry["status"] = "other settings"
                    continue
                print(f"[{row.name} {pool}] {portable(str(path))} records no settings (an "
                      "earlier version's): recomputed", file=sys.stderr)
            if not selected:
                entry["status"] = "no profile" if row.kind == "train" and profile_block(
                    row.experiment, args.profile) is None else "not selected"
                continue
            todo.setdefault(row.name, []).append(entry)
    if clashes:
        print("reproduce_table2: error: " + "; ".join(clashes) + "; nothing was run (fix: "
              "--force (FORCE=1) recomputes the selected rows, or --out DIR (OUT=DIR) gives "
              "another folder)", file=sys.stderr)
        return 2
    rows = {row.name: row for row in table.rows}

    def compute(name: str) -> None:
        """One row's pools, in order (a trained row trains once, then evaluates each)."""
        trained: dict = {}
        for entry in todo[name]:
            t0 = time.time()
            result, status = run_row(rows[name], entry["pool"], args.profile, out, args.force,
                                     extra, trained, rqa)
            entry.update(status=status, result=portable(result),
                         seconds=round(time.time() - t0, 1))
            if "not_run" not in result:
                entry["result"]["reproduced"] = {
                    "status": status, "seconds": entry["seconds"],
                    "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                    "settings": row_settings(rows[name], entry["pool"], args.profile, extra)}
                write_text(out / f"{slug(name)}-{entry['pool']}.json",
                           json.dumps(entry["result"], indent=2))
            print(f"[{name} {entry['pool']}] {status} in {entry['seconds']:.0f} s",
                  file=sys.stderr, flush=True)

    # rows are independent: with --jobs N, N of them run at once (each `rqa` its own process)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool_of_rows:
        for done in [pool_of_rows.submit(compute, name) for name in todo]:
            done.result()  # a failed row fails the table, as it does one row at a time
    text = render(table, entries, args.profile, selection, out, extra)
    if reduced:
        text += (f"\nProfile `{args.profile}` of the trained rows (what it reduces"
                 + (f"; every trained row also took `{args.train_overrides}`" if
                    args.train_overrides else "") + "):\n\n"
                 + "".join(f"- {name}: {d}\n" for name, d in reduced.items()))
    (out / "table2.md").write_text(text)
    print(text)
    counts: dict = {}
    for e in entries:
        counts[e["status"]] = counts.get(e["status"], 0) + 1
    print(json.dumps({
        "table": portable(str(out / "table2.md")), "rows": selection, "status": counts,
        "entries": {f"{e['row']}/{e['pool']}": e["status"] for e in entries
                    if e["status"] in ("computed", "resumed", "model reused", "reused")},
        "seconds": round(time.time() - start, 1)}))
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except UsageError as e:  # a damaged saved file: named, with the fix
        print(f"reproduce_table2: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
