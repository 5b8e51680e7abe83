"""ENDX Table 5: ENDX trained without one GAM term at a time.

Training is ``rqa train`` (the experiments script runs it); this module gives the override
sets of the runs and renders the table from their reports. Removing a term sets its final
weight to 0 (``model.gam.final.<qq|aa|aq|qa>=0``), so its ramp stays at 0 and the other terms
keep their schedule. Each variant writes to its own output folder
(``<runs>/<experiment>_ablation/wo_<key>``) so it never resumes the full ENDX run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..losses.relations import RELATION_NAMES
from .common import (
    DEFAULT_OUTPUT_DIR,
    METRIC_LABELS,
    METRICS,
    RUN_FILES,
    cell,
    markdown_table,
    paper_table,
    paper_table_rows,
    write_json,
    write_markdown,
    write_report_copies,
)
from .runs import report_rows

#: The relations Table 5 removes one at a time, in the table's order (conf/tables/endx_table5.yaml).
GAM_TERMS = tuple(row["term"] for row in paper_table_rows("endx_table5") if "term" in row)
#: Their labels in the tables, "L_q|q", ... (the relation names of retrieval_qa.losses.gam).
TERM_LABELS = {t: f"L_{RELATION_NAMES[t]}" for t in GAM_TERMS}


def ablation_variants(terms: Sequence[str] = GAM_TERMS) -> list[dict]:
    """One variant per removed GAM term: ``{"name", "slug", "term", "overrides"}``.

    Args:
        terms: the removed terms, config names of the relations (``qq``, ``aa``, ``qa``,
            ``aq``).

    Example:

        >>> ablation_variants(["qq"])[0]["overrides"]
        ['model.gam.final.qq=0']
    """
    out = []
    for t in terms:
        if t not in TERM_LABELS:
            raise ValueError(f"unknown GAM term {t!r}; expected one of {list(GAM_TERMS)}")
        out.append({"name": f"w/o {TERM_LABELS[t]}", "slug": f"wo_{t}", "term": t,
                    "overrides": [f"model.gam.final.{t}=0"]})
    return out


def ablation_runs(experiment: str = "endx_gru", profile: str = "cpu",
                  seeds: Sequence[int] = (42,), runs_dir: str | Path = "runs",
                  terms: Sequence[str] = GAM_TERMS, extra: Sequence[str] = ()) -> list[dict]:
    """The ``rqa train`` override lists of every (variant, seed), with the run folder where
    its ``result.json`` will be.

    Args:
        experiment: the ENDX experiment (conf/experiment/).
        profile: the profile (conf/profile/).
        seeds: the seeds, one run each per variant.
        runs_dir: the folder under which ``<experiment>_ablation/wo_<term>`` is made.
        terms: the removed terms (:func:`ablation_variants`).
        extra: more overrides given to every run.

    Example:

        >>> ablation_runs(terms=["qq"])[0]["run_dir"]
        'runs/endx_gru_ablation/wo_qq/endx_gru/cpu-seed42'
    """
    runs = []
    for v in ablation_variants(terms):
        out = Path(runs_dir) / f"{experiment}_ablation" / v["slug"]
        for seed in seeds:
            runs.append({**v, "seed": int(seed), "output_dir": str(out),
                         "run_dir": str(out / experiment / f"{profile}-seed{seed}"),
                         "train_overrides": [f"experiment={experiment}", f"profile={profile}",
                                             f"seed={seed}", f"output_dir={out}",
                                             *v["overrides"], *extra]})
    return runs


def ablation_table(reports: Mapping[str, Sequence[dict] | dict], *,
                   output_dir: str | Path = DEFAULT_OUTPUT_DIR, reference: str | None = None,
                   title: str = "Table 5: ablation of the GAM terms") -> dict:
    """Render Table 5 from finished run reports; writes ``table5.{md,json}`` and the runs'
    report copies.

    Args:
        reports: ``{row name: report or [reports]}``; each report needs ``test.metrics``.
        output_dir: where the table is written.
        reference: the row the deltas are taken against; None: the first row whose name does
            not start with "w/o" and is not a dual encoder, else the first row.
        title: the Markdown table's title.
    """
    out = Path(output_dir)
    rows = report_rows(reports)
    paper5 = paper_table("endx_table5")
    if reference is None:
        ref = next((r for r in rows if not r["name"].startswith("w/o")
                    and "dual" not in r["name"].lower()), rows[0])
    else:
        ref = next((r for r in rows if r["name"] == reference), None)
        if ref is None:
            raise ValueError(f"reference row {reference!r} is not among {[r['name'] for r in rows]}")
    for r in rows:
        r["delta_vs_reference"] = {m: round(r[m]["mean"] - ref[m]["mean"], 4) for m in METRICS}
    header = ["method", *(METRIC_LABELS[m] for m in METRICS), f"Δ MRR vs {ref['name']}", "runs"]
    lines = [f"# {title}", "", f"Test pool: {rows[0]['test_pool']}. Cells: mean ± sample std "
             "over runs (seeds); a removed term has its final GAM weight set to 0.", ""]
    lines += markdown_table(header, ([r["name"], *(cell(r[m]) for m in METRICS),
                                      f"{r['delta_vs_reference']['mrr']:+.2f}", r["runs"]]
                                     for r in rows))
    lines += ["", "Paper (ReQA NQ, BERT-base towers): " + "; ".join(
        f"{n} {v['mrr']:.2f} / {v['r@1']:.2f} / {v['r@5']:.2f}" for n, v in paper5.items())]
    run_files = write_report_copies(out, "table5", reports)
    lines += ["", "Per-run results (each run's result.json without its checkpoint paths): "
                  f"`{RUN_FILES}/table5/<method>/<experiment>-seed<seed>/`."]
    files = [write_json(out / "table5.json", {"reference": ref["name"],
                                              "run_files": f"{RUN_FILES}/table5", "rows": rows,
                                              "paper": paper5}),
             write_markdown(out / "table5.md", lines)]
    return {"analysis": "ablation", "reference": ref["name"],
            "rows": {r["name"]: {m: r[m]["mean"] for m in METRICS} for r in rows},
            "files": files, "run_files": run_files}
