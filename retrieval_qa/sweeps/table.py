"""The comparison table of a sweep run by ``rqa sweep`` (``rqa analyze side-by-side --sweep
DIR``): one row per setting (the swept parameters other than the seed), each metric as mean ±
sample std over the setting's finished runs (seeds).

A sweep folder holds, per run, ``<setting>/<experiment>/<profile>-seed<seed>/`` with
``sweep.json`` (the run's parameters, written before it starts) and, once finished,
``result.json`` (and, from ``rqa train`` of this version, ``per_question.jsonl.gz``); a run
with a folder but no result is counted as started, not finished (runs
that ``rqa sweep --runs`` / ``--count`` left out have no folder and are not counted).

Run folders are git-ignored and local, so a table written elsewhere (``output_dir``, e.g.
``results/...``) gets each finished run's small files beside it:
``runs/<sweep>/<setting>/<experiment>/<profile>-seed<seed>/`` with the run's ``sweep.json``
and its ``result.json`` without the checkpoint paths (metrics, settings, seed, times, and the
``last_logged`` values the table used), paths named by :mod:`retrieval_qa.portable_paths`.
That folder is itself a sweep folder: ``--sweep <table dir>/runs/<sweep>`` recomputes the
table from the committed files alone.

``baseline=`` names a row (its label) the others are tested against, question by question
(:mod:`retrieval_qa.analysis.compare`: the difference of the first metric, its paired
bootstrap 95 % interval and the randomisation p-value Holm-corrected across the rows, seeds
averaged per question); rows whose runs kept no per-question records say so in that column.

``merge=`` pools the runs of the folder into an earlier table of the same sweep (its
``sweep_table.json``, e.g. the committed one made on another machine), setting by setting,
from the table's spreads alone."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

from ..analysis.common import (
    METRIC_LABELS,
    METRICS,
    RUN_FILES,
    cell,
    last_logged,
    markdown_table,
    output_name,
    pool_spreads,
    run_copy,
    spread,
    write_json,
    write_markdown,
)
from ..analysis.sweep_runs import load_sweep_runs
from ..evaluation.per_question import RUN_DIR_NAME as PER_QUESTION
from ..written import read_json_or_refuse
from .plan import metric_value


def _show(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_show(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _last_logged(run: dict, keys: Sequence[str]) -> dict[str, float | None]:
    """The last logged value of each key: the run's CSV log, else (a run copied beside a
    table, without its log) the ``last_logged`` its result.json carries."""
    last = last_logged(run["run_dir"], keys)
    kept = (run["report"] or {}).get("last_logged") or {}
    return {k: kept.get(k) if v is None else v for k, v in last.items()}


def write_run_files(runs: Sequence[dict], sweep_dir: str | Path, out: Path, name: str,
                    logged: Sequence[str] = (), extra: Sequence[str] = ()) -> list[str]:
    """Each finished run's ``sweep.json`` and small ``result.json`` (the report without its
    checkpoint paths, :func:`~retrieval_qa.analysis.common.run_copy`) under
    ``out/runs/<name>/<its folder in the sweep>/``; returns the result files written.
    Nothing is written when ``out`` is the sweep folder or inside it (the runs are there, and
    copies would be read as runs of the sweep).

    Args:
        runs: the sweep's runs (``load_sweep_runs``: ``sweep``, ``report``, None when not
            finished, and ``run_dir``).
        sweep_dir: the sweep's folder, which the runs' folders are named relative to.
        out: the table's folder.
        name: the sweep's name.
        logged: CSV-log keys whose last values the copied report keeps as ``last_logged``.
        extra: names of other JSON files of a run folder, copied where present (e.g. a
            study's evaluations of the run on other pools).
    """
    root, where = Path(sweep_dir).resolve(), out.resolve()
    if where == root or root in where.parents:
        return []
    written = []
    for run in runs:
        if run["report"] is None:
            continue
        target = out / RUN_FILES / name / Path(run["run_dir"]).resolve().relative_to(root)
        report = run_copy(run["report"])
        if logged:
            report["last_logged"] = _last_logged(run, logged)
        write_json(target / "sweep.json", run["sweep"])
        written.append(write_json(target / "result.json", report))
        record = Path(run["run_dir"]) / PER_QUESTION
        if record.is_file():  # the run's per-question record, for --baseline and rqa compare
            shutil.copyfile(record, target / PER_QUESTION)
        for file in extra:
            if (Path(run["run_dir"]) / file).is_file():
                write_json(target / file, json.loads(
                    (Path(run["run_dir"]) / file).read_text(encoding="utf-8")))
    return written


def sweep_table(sweep_dir: str | Path, *, output_dir: str | Path | None = None,
                metrics: Sequence[str] | None = None, title: str | None = None,
                tag: str | None = None, logged: Sequence[str] = (),
                merge: str | Path | None = None, baseline: str | None = None) -> dict:
    """Writes ``sweep_table[_TAG].{md,json}``: per setting the test metrics, the sweep's own
    metric, the best validation score, the training time and the last logged value of each
    key of ``logged``, each as mean ± sample std over its finished runs, with the seeds and
    how many runs are finished of those started. Returns the rows' means, the best setting's
    label and the files written.

    Args:
        sweep_dir: the sweep's folder (``runs/sweeps/<name>/``, or a table's run copies).
        output_dir: the table's folder; None: the sweep folder. Elsewhere, the finished runs'
            small files go beside it (:func:`write_run_files`).
        metrics: the test metrics, e.g. ``mrr``, ``r@1``; None: MRR, R@1 and R@5.
        title: the Markdown file's heading; None: ``Sweep <name>``.
        tag: the files' name suffix (``sweep_table_TAG``); None: none.
        logged: keys of the runs' CSV logs (e.g. ``train/gam_loss``), a column each.
        merge: an earlier ``sweep_table.json`` of this sweep whose rows the folder's runs are
            pooled into (:func:`merge_table`); None: none.
        baseline: the label of the row the others are tested against on the first metric
            (:func:`baseline_column`); None: no test.
    """
    runs = load_sweep_runs(sweep_dir)
    first = runs[0]["sweep"]
    name, sweep_metric = first.get("sweep", Path(sweep_dir).name), first.get("metric")
    metrics = list(metrics or METRICS)
    keys: list[str] = []
    for r in runs:
        keys += [k for k in r["sweep"].get("setting", {}) if k not in keys]
    groups: dict[str, list[dict]] = {}
    for r in runs:
        groups.setdefault(_setting_key(r["sweep"].get("setting", {})), []).append(r)
    rows = []
    for members in groups.values():
        done = [m for m in members if m["report"] is not None]
        _same_settings(done)
        reports = [m["report"] for m in done]
        lasts = [_last_logged(m, logged) for m in done] if logged else []
        rows.append({
            "label": members[0]["sweep"].get("label"),
            "setting": members[0]["sweep"].get("setting", {}),
            "runs": len(done), "started": len(members),
            "seeds": [m["report"].get("seed") for m in done],
            "experiments": sorted({str(r.get("experiment")) for r in reports}),
            "test_pools": sorted({f"{r['test'].get('dataset', '?')}/{r['test'].get('pool', '?')}"
                                  for r in reports if "test" in r}),
            "run_dirs": [m["run_dir"] for m in done],
            **{m: spread([(r.get("test") or {}).get("metrics", {}).get(m) for r in reports])
               for m in metrics},
            "sweep_metric": spread([metric_value(r, sweep_metric) for r in reports])
            if sweep_metric else None,
            "best_val": spread([r.get("best_val_score") for r in reports]),
            "last_logged": {k: spread([last[k] for last in lasts]) for k in logged},
            "train_seconds": spread([r.get("train_seconds") for r in reports])})
    merged = []
    if merge is not None:
        previous = _load_table(merge, name)
        rows = merge_table(previous, rows, metrics, logged, str(merge))
        keys = previous["swept"] + [k for k in keys if k not in previous["swept"]]
        merged = [*previous.get("merged", []), str(merge)]
    vs = baseline_column(rows, baseline, metrics[0]) if baseline else None
    goal = first.get("goal")
    best = _best(rows, goal)
    title = title or f"Sweep {name}"
    pools = sorted({p for r in rows for p in r["test_pools"]})
    show_metric = sweep_metric and not (sweep_metric.startswith("test/")
                                        and sweep_metric[5:] in metrics)
    header = [*keys, *(METRIC_LABELS.get(m, m.upper()) for m in metrics),
              *([sweep_metric] if show_metric else []), "best val",
              *(f"last {k}" for k in logged), "train s", "runs", "seeds",
              *([vs["header"]] if vs else [])]
    table = markdown_table(header, ([
        *(_show(r["setting"].get(k, "–")) for k in keys),
        *(cell(r[m]) for m in metrics), *([cell(r["sweep_metric"])] if show_metric else []),
        cell(r["best_val"]), *(cell(r["last_logged"][k], 3) for k in logged),
        cell(r["train_seconds"], 0),
        f"{r['runs']}/{r['started']}" + (" best" if r is best else ""),
        ", ".join(map(str, r["seeds"])), *([vs["cells"][i]] if vs else [])]
        for i, r in enumerate(rows)))
    lines = [f"# {title}", "",
             f"From `{sweep_dir}`"
             + "".join(f" and the table `{m}`" for m in merged)
             + f" (`rqa sweep`, {sum(r['started'] for r in rows)} runs started, "
             f"{sum(r['runs'] for r in rows)} finished). One row per setting (the swept "
             "parameters other than the seed); cells: mean ± sample std over the setting's "
             "finished runs. Test pool: " + (", ".join(pools) or "–") + ". 'best val' is the "
             "monitored validation score of model selection, 'train s' the wall time of "
             "`rqa train`; 'runs' is finished / started."
             + (" 'last KEY': the value the run logged last (its CSV log)." if logged else "")
             + (" Runs of the earlier table are pooled with this folder's into the same "
                "setting's row, mean and sample std recomputed from the two groups' "
                "spreads; their run folders are not here." if merged else ""),
             ""]
    lines += table
    if vs:
        lines += ["", vs["note"]]
    if best is not None:
        lines += ["", f"Best setting by {sweep_metric} (mean over seeds): {best['label']} "
                      f"({cell(best['sweep_metric'])})."]
    out = Path(output_dir) if output_dir is not None else Path(sweep_dir)
    run_files = write_run_files(runs, sweep_dir, out, name, logged)
    if run_files:
        lines += ["", f"Per-run results (each run's result.json without its checkpoint paths, "
                      f"and its sweep.json): `{RUN_FILES}/{name}/`; `rqa analyze side-by-side "
                      f"--sweep {RUN_FILES}/{name}` recomputes the rows of the runs there."]
    stem = output_name("sweep_table", tag)
    files = [write_json(out / f"{stem}.json", {"title": title, "sweep": name,
                                               "metric": sweep_metric, "swept": keys,
                                               "best": best and best["label"],
                                               **({"merged": merged} if merged else {}),
                                               **({"baseline": vs["json"]} if vs else {}),
                                               **({"run_files": f"{RUN_FILES}/{name}"}
                                                  if run_files else {}),
                                               "rows": rows}),
             write_markdown(out / f"{stem}.md", lines)]
    return {"analysis": "side-by-side", "sweep": name, "metric": sweep_metric,
            "best": best and best["label"],
            "rows": {r["label"]: {m: (r[m] or {}).get("mean") for m in metrics} for r in rows},
            "files": files, "run_files": run_files}


def _same_settings(runs: Sequence[dict]) -> None:
    """The finished runs of one row (one setting, its seeds) must have been trained with the
    same settings but the seed: their ``config.yaml`` files are compared (runs copied beside a
    table have none: they were checked when that table was made). Runs of other settings in
    one row (a sweep file changed between calls into the same folder) are an error naming
    them, never averaged."""
    from ..errors import SettingsMismatchError
    from ..training.run_folder import CONFIG, describe, differences, read_config

    fix = "rerun those runs into their own sweep folder (rqa sweep --output-dir), or remove them"
    configs = [(r["run_dir"], Path(r["run_dir"]) / CONFIG) for r in runs]
    configs = [(d, read_config(p, fix)) for d, p in configs if p.is_file()]
    for where, cfg in configs[1:]:
        first_dir, first = configs[0]
        cfg.seed = first.seed  # the seeds differ by design (and what is derived from them)
        diffs = differences(first, cfg)
        if diffs:
            raise SettingsMismatchError(where, diffs, f"runs {first_dir} and {where} are of "
                                        f"one row of the sweep table but were trained with "
                                        f"other settings ({describe(diffs)}) (fix: {fix})")


def _best(rows: list[dict], goal: str | None) -> dict | None:
    scored = [r for r in rows if r["sweep_metric"]]
    if not scored:
        return None
    sign = -1 if goal == "minimize" else 1
    return max(scored, key=lambda r: sign * r["sweep_metric"]["mean"])


def _setting_key(setting: dict) -> str:
    return json.dumps(setting, sort_keys=True, default=str)


def _load_table(path: str | Path, sweep: str) -> dict:
    """An earlier ``sweep_table.json`` of ``sweep``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--merge {path}: no such file (an earlier sweep_table.json "
                                "of this sweep)")
    table = read_json_or_refuse(path, "--merge", "give an intact sweep_table.json of this "
                                "sweep (restore it, or write it again with `rqa analyze "
                                "side-by-side --sweep`)")
    if table.get("sweep") != sweep:
        raise ValueError(f"--merge {path}: a table of sweep {table.get('sweep')!r}, not of "
                         f"{sweep!r}; give the table of the same sweep")
    return table


def merge_table(previous: dict, rows: list[dict], metrics: Sequence[str],
                logged: Sequence[str] = (), source: str = "the earlier table") -> list[dict]:
    """The earlier table's rows (in its order) with this folder's runs pooled into the row of
    the same setting, then the folder's new settings. A seed in both is an error (a run is
    counted once), and so is a row to pool into that lacks a column of this table; a row kept
    as it was shows "–" there. The earlier table's unfinished runs are dropped (their folders
    are gone: a rerun is in this folder).

    Args:
        previous: the earlier table (its ``sweep_table.json``, read).
        rows: this folder's rows.
        metrics: the test metrics of the table's columns.
        logged: the CSV-log keys of its ``last KEY`` columns.
        source: the earlier table as errors name it (its path).
    """
    fresh = {_setting_key(r["setting"]): r for r in rows}
    out = []
    for old in previous["rows"]:
        new = fresh.pop(_setting_key(old["setting"]), None)
        if new is None:
            out.append({**old, "started": old["runs"], **{m: old.get(m) for m in metrics},
                        "last_logged": {k: old.get("last_logged", {}).get(k) for k in logged}})
            continue
        missing = [m for m in metrics if m not in old] + [
            f"last {k}" for k in logged if k not in old.get("last_logged", {})]
        if missing:
            raise ValueError(f"--merge {source}: row {old['label']!r} has no "
                             f"{', '.join(missing)} to pool this folder's runs into; give the "
                             "--metrics / --last-logged the table was made with")
        both = sorted(set(old["seeds"]) & set(new["seeds"]))
        if both:
            raise ValueError(f"--merge {source}: setting {old['label']!r} has seed(s) {both} "
                             "both in the table and in the sweep folder (a run is counted "
                             "once); leave out --merge, or the run folder, for those seeds")
        out.append({
            **old, "runs": old["runs"] + new["runs"], "started": old["runs"] + new["started"],
            "seeds": old["seeds"] + new["seeds"],
            "experiments": sorted({*old["experiments"], *new["experiments"]}),
            "test_pools": sorted({*old["test_pools"], *new["test_pools"]}),
            "run_dirs": old["run_dirs"] + new["run_dirs"],
            **{k: pool_spreads(old.get(k), new.get(k))
               for k in (*metrics, "sweep_metric", "best_val", "train_seconds")},
            "last_logged": {k: pool_spreads(old["last_logged"].get(k), v)
                            for k, v in new["last_logged"].items()}})
    return out + list(fresh.values())


def baseline_column(rows: list[dict], baseline: str, metric: str) -> dict:
    """The column "vs BASELINE": per row, ``metric``'s difference to the baseline row (seeds
    averaged per question), its paired bootstrap 95 % interval, the randomisation p-value
    Holm-corrected across the rows tested, and * where that p < 0.05; "no per-question
    records" where a run of the row (or of the baseline) kept none.

    Args:
        rows: the table's rows; each row tested gets ``vs_baseline``, its statistics.
        baseline: the baseline row's label (a ValueError when no row has it).
        metric: the metric compared, e.g. ``mrr`` (a P@k is compared as R@k).
    """
    from ..analysis.compare import Setting, compare_settings
    from ..evaluation.per_question import read_per_question

    labels = [r["label"] for r in rows]
    if baseline not in labels:
        raise ValueError(f"--baseline {baseline!r}: no such row; the rows are "
                         f"{', '.join(map(repr, labels))}")
    name = metric.replace("p@", "r@")  # P@k is R@k (evaluation/metrics.py)

    def records(row):
        files = [Path(d) / PER_QUESTION for d in row.get("run_dirs", [])]
        if not files or not all(f.is_file() for f in files) or len(files) != row["runs"]:
            return None
        return [read_per_question(f) for f in files]

    base_row = rows[labels.index(baseline)]
    base = records(base_row)
    tested = [(i, recs) for i, r in enumerate(rows)
              if r is not base_row and (recs := records(r)) is not None]
    missing = "no per-question records"
    cells = [missing] * len(rows)
    cells[labels.index(baseline)] = "baseline" if base is not None else missing
    result = None
    if base is not None and tested:
        result = compare_settings([Setting(baseline, base),
                                   *(Setting(rows[i]["label"], recs) for i, recs in tested)],
                                  metrics=[name])
        for (i, _), comp in zip(tested, result["comparisons"], strict=True):
            st = comp["metrics"][name]
            cells[i] = (f"{st['diff']:+.2f} [{st['ci95'][0]:+.2f}, {st['ci95'][1]:+.2f}] "
                        f"p={st['p_holm']:.2g}{' *' if st['significant'] else ''}")
            rows[i]["vs_baseline"] = {"metric": name, **{k: st[k] for k in (
                "diff", "ci95", "p", "p_holm", "significant")}, "wins": comp["wins"],
                "ties": comp["ties"], "losses": comp["losses"]}
    else:
        tested = []
    note = (f"'vs {baseline}': {name} of the row minus the baseline row's, per question "
            "averaged over seeds (`rqa compare`): the paired bootstrap 95 % interval, the "
            "paired randomisation p Holm-corrected across the rows tested, * where it is "
            "below 0.05; rows whose runs kept no per-question records (per_question.jsonl.gz) "
            "are not tested.")
    return {"header": f"vs {baseline}", "cells": cells, "note": note,
            "json": {"label": baseline, "metric": name, "tested": len(tested),
                     "questions": result and result["questions"]}}
