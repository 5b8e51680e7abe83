"""The comparison table of a sweep run by ``rqa sweep`` (``rqa analyze side-by-side --sweep
DIR``): one row per setting (the swept parameters other than the seed), each metric as mean ±
sample std over the setting's finished runs (seeds).

A sweep folder holds, per run, ``<setting>/<experiment>/<profile>-seed<seed>/`` with
``sweep.json`` (the run's parameters, written before it starts) and, once finished,
``result.json``; a run with a folder but no result is counted as started, not finished (runs
that ``rqa sweep --runs`` / ``--count`` left out have no folder and are not counted)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from .common import (
    METRIC_LABELS,
    METRICS,
    cell,
    last_logged,
    markdown_table,
    output_name,
    spread,
    write_json,
    write_markdown,
)


def load_sweep_runs(sweep_dir: str | Path) -> list[dict]:
    """Every run of a sweep folder as ``{"sweep": <sweep.json>, "report": <result.json> or
    None, "run_dir": ...}``, in the sweep's order."""
    root = Path(sweep_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"--sweep {sweep_dir}: no such folder (`rqa sweep FILE` writes "
                                "runs/sweeps/<name>/)")
    runs = []
    for info_file in sorted(root.rglob("sweep.json")):
        info = json.loads(info_file.read_text(encoding="utf-8"))
        result = info_file.parent / "result.json"
        report = json.loads(result.read_text(encoding="utf-8")) if result.is_file() else None
        runs.append({"sweep": info, "report": report, "run_dir": str(info_file.parent)})
    if not runs:
        raise FileNotFoundError(f"--sweep {sweep_dir}: no run folders (sweep.json) under it; "
                                "run `rqa sweep FILE` first")
    runs.sort(key=lambda r: r["sweep"].get("index", 0))
    return runs


def _show(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_show(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _metric(report: dict, name: str) -> float | None:
    from ..training.sweep import metric_value

    return metric_value(report, name)


def sweep_table(sweep_dir: str | Path, *, output_dir: str | Path | None = None,
                metrics: Sequence[str] | None = None, title: str | None = None,
                tag: str | None = None, logged: Sequence[str] = ()) -> dict:
    """Writes ``sweep_table[_TAG].{md,json}`` (into ``output_dir``, default the sweep folder):
    per setting the test metrics (``metrics``, default MRR / R@1 / R@5), the sweep's own
    metric, the best validation score, the training time and the last logged value of each
    key of ``logged`` (the runs' CSV logs, e.g. ``train/gam_loss``), each as mean ± sample std
    over its finished runs, with the seeds and how many runs are finished of those started."""
    runs = load_sweep_runs(sweep_dir)
    first = runs[0]["sweep"]
    name, sweep_metric = first.get("sweep", Path(sweep_dir).name), first.get("metric")
    metrics = list(metrics or METRICS)
    keys: list[str] = []
    for r in runs:
        keys += [k for k in r["sweep"].get("setting", {}) if k not in keys]
    groups: dict[str, list[dict]] = {}
    for r in runs:
        groups.setdefault(json.dumps(r["sweep"].get("setting", {}), sort_keys=True,
                                     default=str), []).append(r)
    rows = []
    for members in groups.values():
        done = [m for m in members if m["report"] is not None]
        reports = [m["report"] for m in done]
        lasts = [last_logged(m["run_dir"], logged) for m in done] if logged else []
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
            "sweep_metric": spread([_metric(r, sweep_metric) for r in reports])
            if sweep_metric else None,
            "best_val": spread([r.get("best_val_score") for r in reports]),
            "last_logged": {k: spread([last[k] for last in lasts]) for k in logged},
            "train_seconds": spread([r.get("train_seconds") for r in reports])})
    goal = first.get("goal")
    best = _best(rows, goal)
    title = title or f"Sweep {name}"
    pools = sorted({p for r in rows for p in r["test_pools"]})
    show_metric = sweep_metric and not (sweep_metric.startswith("test/")
                                        and sweep_metric[5:] in metrics)
    header = [*keys, *(METRIC_LABELS.get(m, m.upper()) for m in metrics),
              *([sweep_metric] if show_metric else []), "best val",
              *(f"last {k}" for k in logged), "train s", "runs", "seeds"]
    table = markdown_table(header, ([
        *(_show(r["setting"].get(k, "–")) for k in keys),
        *(cell(r[m]) for m in metrics), *([cell(r["sweep_metric"])] if show_metric else []),
        cell(r["best_val"]), *(cell(r["last_logged"][k], 3) for k in logged),
        cell(r["train_seconds"], 0),
        f"{r['runs']}/{r['started']}" + (" best" if r is best else ""),
        ", ".join(map(str, r["seeds"]))] for r in rows))
    lines = [f"# {title}", "",
             f"From `{sweep_dir}` (`rqa sweep`, {len(runs)} runs started, "
             f"{sum(r['runs'] for r in rows)} finished). One row per setting (the swept "
             "parameters other than the seed); cells: mean ± sample std over the setting's "
             "finished runs. Test pool: " + (", ".join(pools) or "–") + ". 'best val' is the "
             "monitored validation score of model selection, 'train s' the wall time of "
             "`rqa train`; 'runs' is finished / started."
             + (" 'last KEY': the value the run logged last (its CSV log)." if logged else ""),
             ""]
    lines += table
    if best is not None:
        lines += ["", f"Best setting by {sweep_metric} (mean over seeds): {best['label']} "
                      f"({cell(best['sweep_metric'])})."]
    out = Path(output_dir) if output_dir is not None else Path(sweep_dir)
    stem = output_name("sweep_table", tag)
    files = [write_json(out / f"{stem}.json", {"title": title, "sweep": name,
                                               "metric": sweep_metric, "swept": keys,
                                               "best": best and best["label"], "rows": rows}),
             write_markdown(out / f"{stem}.md", lines)]
    return {"analysis": "side-by-side", "sweep": name, "metric": sweep_metric,
            "best": best and best["label"],
            "rows": {r["label"]: {m: (r[m] or {}).get("mean") for m in metrics} for r in rows},
            "files": files}


def _best(rows: list[dict], goal: str | None) -> dict | None:
    scored = [r for r in rows if r["sweep_metric"]]
    if not scored:
        return None
    sign = -1 if goal == "minimize" else 1
    return max(scored, key=lambda r: sign * r["sweep_metric"]["mean"])
