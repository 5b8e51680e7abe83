"""Every result under ``results/`` beside the papers' numbers (``notebooks/results_overview.ipynb``).

:func:`collect_results` reads the JSON files of a results folder, whatever wrote them:

* tables: a JSON object with a ``rows`` list (``side_by_side*.json``, ``table4/5/6.json``, and
  any ``**/table.json`` of the reproduction targets), each row named by ``name`` or ``model``
  and holding metrics as numbers or as ``{mean, std, n}`` over seeds. The paper table is the
  object's ``table`` key when it names a ``conf/tables`` file, else the file's stem
  (:data:`TABLE_OF_STEM`);
* evaluations (``rqa evaluate`` outputs with ``metrics`` and ``dataset``, e.g.
  ``results/table2/<row>-<pool>.json``): the row is the file name before ``-<pool>``;
* training reports (``rqa train``'s ``result.json`` with ``experiment``): the row is the paper
  row whose ``experiment`` is that experiment (``conf/tables``), seeds grouped into a mean and
  a standard deviation; the test metrics, else the last validation ones (marked ``[val]``);
* the seed references that a paper table's rows declare (``reference:`` in conf/tables,
  :mod:`.references`: per-question records or a sweep table's row, on today's pools), when
  their files are in the folder; one whose settings differ from the row's profile is marked
  ``[other settings]``.

The tables of :data:`OLD_POOLS` (runs on the pools of the sentence splitter before the
reference splitter, another dev pool) are shown apart from the paper's table, marked
``[old pools]``: the rows' references are today's.

The per-run files committed beside a table (``runs/`` folders) are skipped: the table holds
their numbers.

Each entry is one number: ``{table, method, metric, ours, spread, runs, paper, source}``; the
paper's number comes from ``conf/tables/<table>.yaml`` (the only place they are kept), or from
the row itself when it carries ``paper``. Paper rows that we have no number for are entries
with ``ours`` None, so a plot shows every row of the paper's table.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..config import conf_names
from .common import RUN_FILES, paper_table, paper_table_rows

#: file stems of the committed tables -> their paper table (conf/tables/<name>.yaml)
TABLE_OF_STEM = {"side_by_side": "endx_table2", "side_by_side_gru_weights": "endx_table2",
                 "table2": "endx_table2", "table4": "endx_table4", "table5": "endx_table5",
                 "table6": "endx_table6"}
#: committed tables (paths in the results folder) whose runs used the pools of the sentence
#: splitter before the reference splitter, another dev pool ("the earlier runs" of results/endx/)
OLD_POOLS = frozenset({"endx/side_by_side.json", "endx/side_by_side_gru_weights.json"})
#: metrics looked for in a table that has no paper table
DEFAULT_METRICS = ("mrr", "r@1", "r@5", "avg_recall")
METRIC_NAMES = {"mrr": "MRR", "avg_recall": "average recall"}


def _table_setting(table: str | None, key: str, default=None):
    """A top-level setting of conf/tables/<table>.yaml (``pools``, ``paper_pool``)."""
    if table is None:
        return default
    from ..config import table_layout

    value = table_layout(table).get(key, default)
    return list(value) if hasattr(value, "__len__") and not isinstance(value, str) else value


def paper_tables() -> list[str]:
    return sorted(conf_names("tables"))


def _paper_metrics(table: str | None) -> list[str]:
    if table is None:
        return list(DEFAULT_METRICS)
    metrics: list[str] = []
    for row in paper_table(table).values():
        for k, v in (row or {}).items():
            if isinstance(v, int | float) and k not in metrics and k != "ms":
                metrics.append(k)
    return metrics or list(DEFAULT_METRICS)


def _experiment_rows() -> dict[str, tuple[str, str]]:
    """experiment -> (paper table, row name), from the rows of conf/tables with an
    ``experiment`` key."""
    found: dict[str, tuple[str, str]] = {}
    for table in paper_tables():
        for row in paper_table_rows(table):
            if row.get("experiment"):
                found.setdefault(row["experiment"], (table, row["name"]))
    return found


def _value(v) -> tuple[float | None, float | None, int | None]:
    if isinstance(v, dict) and "mean" in v:
        return v.get("mean"), v.get("std"), v.get("n")
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v), None, 1
    return None, None, None


def _seeds(seeds) -> list[str]:
    if isinstance(seeds, list) and len(seeds) > 1:
        return [f"{len(seeds)} seeds"]
    if isinstance(seeds, list) and seeds:
        seeds = seeds[0]
    return [] if seeds is None else [f"seed {seeds}"]


def _entry(table, name, metric, ours, spread, runs, paper, source, shown=(), extra=(),
           tag="") -> dict:
    """An entry; its label is ``name`` with the ``shown`` qualifiers (the pool of an
    evaluation, the profile of a report), and the ``extra`` ones (profile, seeds) too when
    another entry of the table has the same label (:func:`_label_apart`)."""
    return {"table": table, "method": _label(name, list(shown), tag), "metric": metric,
            "ours": ours, "spread": spread, "runs": runs, "paper": paper, "source": source,
            "_name": name, "_shown": list(shown), "_extra": list(extra), "_tag": tag}


def _label(name: str, qualifiers: list[str], tag: str = "") -> str:
    return name + (f" ({', '.join(qualifiers)})" if qualifiers else "") + tag


def _table_entries(data: dict, path: Path, rel: str) -> list[dict]:
    named = data.get("table")
    table = named if isinstance(named, str) and named in paper_tables() \
        else TABLE_OF_STEM.get(path.stem)
    tag = " [old pools]" if rel in OLD_POOLS else ""
    metrics = _paper_metrics(table)
    if tag:  # not the paper table's figures; its metrics still name the columns
        table = None
    paper_here = data.get("paper") if isinstance(data.get("paper"), dict) else {}
    out = []
    for row in data["rows"]:
        if not isinstance(row, dict):
            continue
        name = row.get("name") or row.get("model")
        if not name:
            continue
        pool = str(row.get("test_pool") or "").rpartition("/")[2]
        extra = ([f"{row['profile']} profile"] if row.get("profile") else []) + \
            _seeds(row.get("seeds")) + ([f"{pool} pool"] if pool else [])
        for metric in metrics:
            ours, spread, runs = _value(row.get(metric))
            if ours is None:
                continue
            paper = (row.get("paper") or paper_here.get(name) or {}).get(metric)
            out.append(_entry(table, str(name), metric, ours, spread, runs or row.get("runs"),
                              paper, rel, extra=extra, tag=tag))
    return out


def _reference_entries(root: Path) -> list[dict]:
    """The seed references declared by the rows of every paper table (conf/tables, a row's
    ``reference:``) whose files are in ``root``."""
    from ..config import table_layout
    from .references import table_references

    out = []
    for table in paper_tables():
        for (name, pool), ref in table_references(
                table_layout(table), root, f"conf/tables/{table}.yaml").items():
            source = ref.path.removeprefix("results/")
            extra = [f"{ref.profile} profile", *_seeds(ref.seeds), f"{pool} pool"]
            tag = " [other settings]" if ref.differs else ""
            out += [_entry(table, name, metric, ref.metrics[metric], ref.std[metric],
                           len(ref.seeds), None, source, extra=extra, tag=tag)
                    for metric in _paper_metrics(table) if metric in ref.metrics]
    return out


def _evaluation_entries(data: dict, path: Path, rel: str) -> list[dict]:
    pool = data.get("pool")
    stem = path.stem
    name = stem[: -len(pool) - 1] if pool and stem.endswith(f"-{pool}") else stem
    table = TABLE_OF_STEM.get(path.parent.name)
    if table is not None and pool not in _table_setting(table, "pools", [pool]):
        table = None  # a pool the paper's table is not about
    training = data.get("training") if isinstance(data.get("training"), dict) else {}
    extra = ([f"{training['profile']} profile"] if training.get("profile") else []) + \
        _seeds(training.get("seed"))
    return [_entry(table, name, metric, float(value), None, 1, None, rel,
                   shown=[f"{pool} pool"] if pool else [], extra=extra)
            for metric in _paper_metrics(table)
            if isinstance(value := data["metrics"].get(metric), int | float)]


def _report_entries(reports: Sequence[tuple[dict, str]]) -> list[dict]:
    rows = _experiment_rows()
    groups: dict[tuple, list[tuple[dict, dict, str]]] = {}
    seen: set = set()
    for data, rel in reports:
        run = (data["experiment"], data.get("profile"), data.get("seed"),
               data.get("best_val_score"), data.get("global_steps"))
        if run in seen:  # the same run's report kept in two places
            continue
        seen.add(run)
        test = (data.get("test") or {}).get("metrics")
        metrics, tag = (test, "") if test else (
            {k.removeprefix("val/"): v for k, v in (data.get("last_val") or {}).items()},
            " [val]")
        table, name = rows.get(data["experiment"], (None, data["experiment"]))
        groups.setdefault((table, name, data.get("profile", "?"), tag), []).append(
            (metrics, data, rel))
    out = []
    for (table, name, profile, tag), items in groups.items():
        pools = {(d.get("test") or {}).get("pool") for _, d, _ in items} - {None}
        extra = _seeds(sorted(d.get("seed") for _, d, _ in items if d.get("seed") is not None))
        extra += [f"{pools.pop()} pool"] if len(pools) == 1 and not tag else []
        for metric in _paper_metrics(table):
            values = [m[metric] for m, _, _ in items if isinstance(m.get(metric), int | float)]
            if not values:
                continue
            out.append(_entry(table, name, metric, statistics.fmean(values),
                              statistics.stdev(values) if len(values) > 1 else None,
                              len(values), None, ", ".join(sorted({r for _, _, r in items})),
                              shown=[f"{profile} profile"], extra=extra, tag=tag))
    return out


def _qualifier_order(qualifier: str) -> int:
    return next((i for i, word in enumerate(("profile", "seed", "pool")) if word in qualifier), 3)


def _alike(a: dict, b: dict) -> bool:
    """Two entries of one method from different files whose labels do not tell them apart:
    what each label shows is true of the other (a dev-pool evaluation beside a seeds table
    of dev-pool runs; not the dev and the train pool of one baseline)."""
    full_a, full_b = {*a["_shown"], *a["_extra"]}, {*b["_shown"], *b["_extra"]}
    return (a["_name"] == b["_name"] and a["source"] != b["source"]
            and set(a["_shown"]) <= full_b and set(b["_shown"]) <= full_a)


def _label_apart(entries: list[dict]) -> None:
    """In a table where one method has numbers from different files that its label does not
    tell apart (Dual-BERTs of a seeds table and of a single evaluation), every row of ours
    shows its extra qualifiers (profile, seeds, pool); two labels still alike then show their
    file, so no two bars of different numbers share a label."""
    by_table: dict = {}
    for e in entries:
        by_table.setdefault(e["table"], []).append(e)
    mixed = {table for table, rows in by_table.items()
             if any(_alike(a, b) for i, a in enumerate(rows) for b in rows[i + 1:])}
    for e in entries:
        if e["table"] in mixed:
            e["_shown"] = sorted(dict.fromkeys(e["_shown"] + e["_extra"]), key=_qualifier_order)
            e["method"] = _label(e["_name"], e["_shown"], e["_tag"])
    labels: dict[tuple, set[str]] = {}
    for e in entries:
        labels.setdefault((e["table"], e["method"]), set()).add(e["source"])
    for e in entries:
        if len(labels[(e["table"], e["method"])]) > 1:
            e["method"] = _label(e["_name"], [*e["_shown"], e["source"]], e["_tag"])


def collect_results(results_dir: str | Path) -> list[dict]:
    """The entries of every result file under ``results_dir`` (see the module docstring),
    with the paper's number attached, plus the paper rows we have no number for.

    Args:
        results_dir: the folder of result files (searched recursively).
    """
    root = Path(results_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder of results")
    entries: list[dict] = []
    reports: list[tuple[dict, str]] = []
    for path in sorted(root.rglob("*.json")):
        if RUN_FILES in path.relative_to(root).parts[:-1]:
            continue  # a table's per-run files (runs/<table>/...): the table is the entry
        rel = path.relative_to(root).as_posix()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if not isinstance(data, dict):
            continue
        if isinstance(data.get("rows"), list):
            entries += _table_entries(data, path, rel)
        elif isinstance(data.get("metrics"), dict) and "dataset" in data:
            entries += _evaluation_entries(data, path, rel)
        elif "experiment" in data and ("test" in data or "last_val" in data):
            reports.append((data, rel))
    entries += _report_entries(reports)
    entries += _reference_entries(root)
    unique: dict[tuple, dict] = {}
    for e in entries:  # a row copied into two tables: kept once
        unique.setdefault((e["table"], e["method"], e["metric"], e["ours"], e["spread"]), e)
    entries = list(unique.values())
    _label_apart(entries)
    for e in entries:
        if e["table"] is not None and e["paper"] is None:
            row = paper_table(e["table"]).get(e["_name"]) or {}
            e["paper"] = row.get(e["metric"])
    for table in sorted({e["table"] for e in entries if e["table"]}):
        have = {(e["_name"], e["metric"]) for e in entries if e["table"] == table}
        for name, paper in paper_table(table).items():
            for metric, value in (paper or {}).items():
                if metric in _paper_metrics(table) and (name, metric) not in have:
                    entries.append(_entry(table, name, metric, None, None, 0, value,
                                          f"conf/tables/{table}.yaml"))
    return [{k: v for k, v in e.items() if not k.startswith("_")} for e in entries]


def table_title(table: str | None, entries: Iterable[dict] = ()) -> str:
    """The ``title`` of conf/tables/<table>.yaml (else its name).

    Args:
        table: the paper table; None: the results without one, named by ``entries``' sources.
        entries: those results (:func:`collect_results`'s entries).
    """
    if table is None:
        sources = sorted({e["source"].split("/")[0] for e in entries})
        return f"results without a paper table ({', '.join(sources)})"
    from ..config import table_layout

    return str(table_layout(table).get("title", table))


def grouped(entries: Sequence[dict]) -> dict[str | None, list[dict]]:
    """Entries by paper table, conf/tables order first, tables-less ones last.

    Args:
        entries: :func:`collect_results`'s entries.
    """
    order = {t: i for i, t in enumerate(paper_tables())}
    groups: dict[str | None, list[dict]] = {}
    for e in sorted(entries, key=lambda e: order.get(e["table"], len(order))):
        groups.setdefault(e["table"], []).append(e)
    return groups


def markdown(entries: Sequence[dict]) -> str:
    """One markdown table per paper table: method, metric, ours (mean ± std, runs), paper.

    Args:
        entries: :func:`collect_results`'s entries.
    """
    lines = []
    for table, rows in grouped(entries).items():
        lines += [f"### {table_title(table, rows)}", ""]
        if _table_setting(table, "paper_pool"):
            lines += [f"The paper's numbers: {_table_setting(table, 'paper_pool')}.", ""]
        lines += ["| method | metric | ours | runs | paper | source |", "|---|---|---|---|---|---|"]
        for e in rows:
            ours = "" if e["ours"] is None else f"{e['ours']:.2f}" + (
                f" ± {e['spread']:.2f}" if e["spread"] is not None else "")
            paper = "" if e["paper"] is None else f"{e['paper']:.2f}"
            lines.append(f"| {e['method']} | {e['metric']} | {ours} | {e['runs'] or ''} | "
                         f"{paper} | {e['source']} |")
        lines.append("")
    return "\n".join(lines)


def plot_table(entries: Sequence[dict], table: str | None, metrics: Sequence[str] | None = None):
    """One panel per metric: for every method a bar of ours (error bar: std over seeds) and a
    hatched bar of the paper's number, the axes labelled (metric in %, method with its
    profile / pool where two differ), the legend below the panels (it hides no bar).
    Returns the matplotlib figure.

    Args:
        entries: :func:`collect_results`'s entries.
        table: the paper table plotted (None: the results without one).
        metrics: the panels' metrics; None: every metric of the table's entries.
    """
    from .common import pyplot

    plt = pyplot()
    rows = [e for e in entries if e["table"] == table]
    metrics = list(metrics or dict.fromkeys(e["metric"] for e in rows))
    methods = list(dict.fromkeys(e["method"] for e in rows))
    height = 0.45 * len(methods) + 2.2
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.5 * len(metrics) + 1.5, height),
                             squeeze=False, sharey=True)
    for ax, metric in zip(axes[0], metrics, strict=True):
        by = {e["method"]: e for e in rows if e["metric"] == metric}
        ys = range(len(methods))
        ours = [by[m]["ours"] if m in by and by[m]["ours"] is not None else 0 for m in methods]
        err = [by[m]["spread"] or 0 if m in by else 0 for m in methods]
        paper = [by[m]["paper"] if m in by and by[m]["paper"] is not None else 0
                 for m in methods]
        ax.barh([y - 0.2 for y in ys], ours, height=0.4, xerr=err, color="tab:blue",
                label="ours (± std over seeds)")
        paper_pool = _table_setting(table, "paper_pool")
        ax.barh([y + 0.2 for y in ys], paper, height=0.4, color="white", edgecolor="tab:gray",
                hatch="//", label="paper" + (f" (its pool: {paper_pool})" if paper_pool else ""))
        ax.set_yticks(list(ys), methods, fontsize=8)
        ax.invert_yaxis()
        name = METRIC_NAMES.get(metric, metric.upper() if metric.startswith(("r@", "p@"))
                                else metric)
        ax.set_title(name)
        ax.set_xlabel(f"{name} (%)")
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].set_ylabel("method")
    handles, labels = axes[0][0].get_legend_handles_labels()
    legend_in, title_in = 0.45, 0.3  # inches below the panels (legend), above (title)
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=7, frameon=False)
    fig.suptitle(table_title(table, rows), fontsize=10)
    fig.tight_layout(rect=(0, legend_in / height, 1, 1 - title_in / height))
    return fig
