"""Tables from finished ``rqa train`` reports (``result.json``): one row per method, mean and
sample spread over its runs (seeds). Used by the side-by-side comparison of a dual encoder and
ENDX (same data, steps and seeds) and by the GAM ablation (:mod:`.ablation`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from omegaconf import OmegaConf

from ..written import read_report
from .common import (
    DEFAULT_OUTPUT_DIR,
    METRIC_LABELS,
    METRICS,
    RUN_FILES,
    cell,
    markdown_table,
    output_name,
    paper_table,
    spread,
    write_json,
    write_markdown,
    write_report_copies,
)


def load_reports(named: Sequence[tuple[str, str]]) -> dict[str, list[dict]]:
    """``(name, path to result.json or its run folder)`` -> ``{name: [report, ...]}``; each
    report gets the run's ``config.yaml`` (beside its result.json) as ``config`` when present.

    Args:
        named: ``(name, path)`` pairs (:func:`~.common.parse_named`); a name given several
            times gathers several runs.
    """
    out: dict[str, list[dict]] = {}
    for name, path in named:
        p = Path(path)
        if p.is_dir():
            p = p / "result.json"
        if not p.is_file():
            raise FileNotFoundError(f"{name}={path}: no result.json there; finish the run with "
                                    "`rqa train` (it resumes from its last checkpoint)")
        report = read_report(p)
        config = p.parent / "config.yaml"  # the run's full config, written by `rqa train`
        if config.is_file():
            report["config"] = OmegaConf.to_container(OmegaConf.load(config))
        out.setdefault(name, []).append(report)
    return out


def report_rows(reports: Mapping[str, Sequence[dict] | dict]) -> list[dict]:
    """``{row name: report or [reports]}`` -> rows with the test metrics (mean and spread
    over the reports), the seeds, training size and time.

    Args:
        reports: ``{row name: report or [reports]}``; every report needs ``test.metrics``
            (``rqa train`` with ``test_after_fit=true``).
    """
    rows = []
    for name, reps in reports.items():
        reps = [reps] if isinstance(reps, Mapping) else list(reps)
        missing = [r.get("experiment", "?") for r in reps if "metrics" not in r.get("test", {})]
        if missing:
            raise ValueError(f"row {name!r}: report(s) without test.metrics ({missing}); train "
                             "with test_after_fit=true")
        first = reps[0]
        rows.append({
            "name": name, "runs": len(reps), "seeds": [r.get("seed") for r in reps],
            "experiments": sorted({str(r.get("experiment")) for r in reps}),
            "profile": first.get("profile"), "description": first.get("description"),
            "pretrained": first.get("pretrained"),
            "gam_final": sorted({json.dumps(r.get("config", {}).get("model", {}).get("gam", {})
                                            .get("final"), sort_keys=True) for r in reps}),
            "test_pool": f"{first['test'].get('dataset', '?')}/{first['test'].get('pool', '?')}",
            "train_pairs": sorted({r.get("data", {}).get("train", {}).get("pairs") for r in reps},
                                  key=str),
            "steps": sorted({r.get("global_steps") for r in reps}, key=str),
            "best_val": spread([r.get("best_val_score") for r in reps]),
            "train_seconds": spread([r.get("train_seconds") for r in reps]),
            **{m: spread([r["test"]["metrics"][m] for r in reps]) for m in METRICS}})
    if not rows:
        raise ValueError("no reports to tabulate")
    return rows


def paper_table2() -> dict[str, dict[str, float]]:
    """The ENDX paper's Table 2 (ReQA SQuAD) by row name, from ``conf/tables/endx_table2.yaml``."""
    return paper_table("endx_table2")


def side_by_side_table(reports: Mapping[str, Sequence[dict] | dict], *,
                       output_dir: str | Path = DEFAULT_OUTPUT_DIR,
                       title: str = "Dual encoders vs ENDX", tag: str | None = None) -> dict:
    """Writes ``side_by_side[_TAG].{md,json}``: per method the test-pool metrics, the best
    validation score and the training time, each as mean ± sample std over its runs, beside
    the paper's Table 2 numbers for the rows named as in that table.

    Args:
        reports: ``{row name: report or [reports]}`` (:func:`report_rows`).
        output_dir: where the table is written.
        title: the Markdown table's title.
        tag: added to the files' names (:func:`~.common.output_name`); None: none.
    """
    rows = report_rows(reports)
    paper = paper_table2()
    for r in rows:
        r["paper"] = paper.get(r["name"])
    out = Path(output_dir)
    stem = output_name("side_by_side", tag)
    header = ["method", *(METRIC_LABELS[m] for m in METRICS), "best val", "train s", "runs",
              "seeds", "pairs", "steps", "paper MRR / R@1 / R@5"]
    lines = [f"# {title}", "",
             f"Test pool: {rows[0]['test_pool']}. Cells: mean ± sample std over runs (seeds); "
             "'best val' is the monitored validation score of model selection, 'train s' the "
             "wall time of `rqa train` (training, validation and export).", ""]
    lines += markdown_table(header, ([
        r["name"], *(cell(r[m]) for m in METRICS), cell(r["best_val"]),
        cell(r["train_seconds"], 0), r["runs"], ", ".join(map(str, r["seeds"])),
        ", ".join(map(str, r["train_pairs"])), ", ".join(map(str, r["steps"])),
        " / ".join(f"{r['paper'][m]:.2f}" for m in METRICS) if r["paper"] else "–"]
        for r in rows))
    lines += ["", "Paper: ENDX paper, Table 2 (ReQA SQuAD, full training, BERT-base or BERT "
              "token embeddings); our rows are reduced profiles, see the settings.", "",
              "Settings:", ""]
    lines += [f"- {r['name']} ({', '.join(r['experiments'])}, profile {r['profile']}): "
              f"{r['description'].rstrip('.')}. Encoder: {r['pretrained']}."
              + "".join(f" GAM final weights: {w}." for w in r["gam_final"] if w != "null")
              for r in rows]
    run_files = write_report_copies(out, stem, reports)
    lines += ["", f"Per-run results (each run's result.json without its checkpoint paths): "
                  f"`{RUN_FILES}/{stem}/<method>/<experiment>-seed<seed>/`."]
    files = [write_json(out / f"{stem}.json", {"title": title, "run_files": f"{RUN_FILES}/{stem}",
                                               "rows": rows}),
             write_markdown(out / f"{stem}.md", lines)]
    return {"analysis": "side-by-side",
            "rows": {r["name"]: {m: r[m]["mean"] for m in METRICS} for r in rows},
            "files": files, "run_files": run_files}
