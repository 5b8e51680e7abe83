"""What the analyses share: ``NAME=PATH`` model lists (a repeated name = several seeds of one
method), mean and spread over seeds, writing tables and figures, picking an answer sentence
shared by several questions."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from omegaconf import OmegaConf

from ..config import table_layout
from ..data.types import Candidate, RetrievalPool
from ..errors import UsageError
from ..portable_paths import portable
from ..written import write_text

DEFAULT_OUTPUT_DIR = "runs/analysis"  # a run folder of yours; results/endx holds the published ones
METRICS = ("mrr", "r@1", "r@5")
METRIC_LABELS = {"mrr": "MRR", "r@1": "R@1", "r@5": "R@5"}


def paper_table(name: str) -> dict[str, dict[str, float]]:
    """A paper table of ``conf/tables/<name>.yaml`` (the only place the papers' numbers are
    kept): ``{row name: {metric: value}}`` in the table's order.

    Args:
        name: the table's name (a file of conf/tables/).
    """
    return {row["name"]: OmegaConf.to_container(row["paper"])
            for row in table_layout(name).rows}


def paper_table_rows(name: str) -> list[dict]:
    """The rows of ``conf/tables/<name>.yaml`` as plain dicts (every key of each row).

    Args:
        name: the table's name (a file of conf/tables/).
    """
    return OmegaConf.to_container(table_layout(name).rows)  # type: ignore[return-value]


def parse_named(specs: Iterable[str], what: str = "model") -> list[tuple[str, str]]:
    """``["Dual-GRUs=runs/dual_gru/cpu-seed1/model", ...]`` -> ``[(name, path), ...]`` in order.
    The same name may come several times (seeds of one method).

    Args:
        specs: the ``NAME=PATH`` arguments; none, or one without a name or a path, is a
            :class:`~retrieval_qa.errors.UsageError`.
        what: the option's name, for the messages (``--model``, ``--run``, ...).

    Example:

        >>> parse_named(["GRU=runs/a", "GRU=runs/b"])
        [('GRU', 'runs/a'), ('GRU', 'runs/b')]
    """
    out = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name.strip() or not path.strip():
            example = "runs/dual_gru/cpu-seed42" + ("/model" if what == "model" else "")
            raise UsageError(f"--{what} {spec!r}: expected NAME=PATH (fix: e.g. --{what} "
                             f"Dual-GRUs={example})")
        out.append((name.strip(), path.strip()))
    if not out:
        raise UsageError(f"give at least one --{what} NAME=PATH")
    return out


def first_per_name(named: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """``(name, folder)`` pairs with each name once, at its first folder (a figure shows one
    run per method).

    Args:
        named: ``(name, folder)`` pairs (:func:`parse_named`).
    """
    first: dict[str, str] = {}
    for name, folder in named:
        first.setdefault(name, folder)
    return list(first.items())


def group_by_name(items: Iterable[tuple[str, object]]) -> dict[str, list]:
    """Order-preserving ``{name: [value, ...]}``.

    Args:
        items: ``(name, value)`` pairs.
    """
    groups: dict[str, list] = {}
    for name, value in items:
        groups.setdefault(name, []).append(value)
    return groups


def spread(values: Sequence[float | None]) -> dict | None:
    """Mean and spread over runs: mean, sample std (0 for one run), min, max, n.

    Args:
        values: one value per run; None and NaN are left out (None when nothing is left).

    Example:

        >>> spread([0.5, 0.7, None])
        {'mean': 0.6, 'std': 0.1414, 'min': 0.5, 'max': 0.7, 'n': 2}
    """
    vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not vals:
        return None
    return {"mean": round(statistics.fmean(vals), 4),
            "std": round(statistics.stdev(vals), 4) if len(vals) > 1 else 0.0,
            "min": round(min(vals), 4), "max": round(max(vals), 4), "n": len(vals)}


def pool_spreads(a: dict | None, b: dict | None) -> dict | None:
    """``spread(xs + ys)`` from ``spread(xs)`` and ``spread(ys)`` alone (exact up to their
    rounding): to pool runs of which only a table's summary is left.

    Args:
        a: one :func:`spread`; None: ``b`` is returned.
        b: the other; None: ``a`` is returned.
    """
    if not a or not b:
        return a or b
    n = a["n"] + b["n"]
    mean = (a["n"] * a["mean"] + b["n"] * b["mean"]) / n
    squares = sum((s["n"] - 1) * s["std"] ** 2 + s["n"] * (s["mean"] - mean) ** 2 for s in (a, b))
    return {"mean": round(mean, 4), "std": round(math.sqrt(squares / (n - 1)), 4),
            "min": min(a["min"], b["min"]), "max": max(a["max"], b["max"]), "n": n}


def cell(stat: dict | None, digits: int = 2) -> str:
    """``55.24`` for one run, ``55.24 ± 1.02`` (sample std) for several; ``–`` for none.

    Args:
        stat: a :func:`spread`, or None.
        digits: the decimals shown.

    Example:

        >>> cell(spread([55.0, 56.0]))
        '55.50 ± 0.71'
    """
    if not stat:
        return "–"
    if stat["n"] > 1:
        return f"{stat['mean']:.{digits}f} ± {stat['std']:.{digits}f}"
    return f"{stat['mean']:.{digits}f}"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """Rows of a Markdown table; a ``|`` inside a cell (e.g. "w/o L_q|q") is escaped.

    Args:
        header: the column titles.
        rows: the rows' cells (any values, shown with ``str``).

    Example:

        >>> markdown_table(["row", "MRR"], [["Dual-GRUs", 0.5]])
        ['| row | MRR |', '|---|---|', '| Dual-GRUs | 0.5 |']
    """

    def esc(c) -> str:
        return str(c).replace("|", "\\|")

    lines = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return lines


def write_json(path: Path, obj) -> str:
    """``obj`` as JSON, its paths named without the machine's layout (portable_paths).

    Args:
        path: the file written; its path is returned as a string.
        obj: a JSON-serialisable object.
    """
    write_text(path, json.dumps(portable(obj), indent=2, ensure_ascii=False) + "\n")
    return str(path)


# Each run behind a committed table is committed beside it, under RUN_FILES/<table>/: its
# `rqa train` report (metrics, settings, seed, times) without LOCAL_FILES, the paths of its run
# folder's checkpoints and export (git-ignored, never committed)
RUN_FILES = "runs"
LOCAL_FILES = ("checkpoint", "best_training_checkpoint", "resumed_from")


def run_copy(report: dict) -> dict:
    """A run's report as committed beside a table (:data:`LOCAL_FILES` left out).

    Args:
        report: the run's ``rqa train`` report (result.json).
    """
    return {k: v for k, v in report.items() if k not in LOCAL_FILES}


def write_report_copies(out: Path, table: str,
                        reports: Mapping[str, Sequence[dict] | dict]) -> list[str]:
    """``{row name: report or [reports]}`` -> ``out/runs/<table>/<row>/<experiment>-seed<seed>/
    result.json`` per report (:func:`run_copy`); the files written. ``rqa analyze side-by-side
    --report ROW=<that folder>`` reads them back.

    Args:
        out: the analysis's output folder.
        table: the table's name (a folder under ``out/runs/``).
        reports: ``{row name: report or [reports]}``.
    """
    written: list[str] = []
    for name, reps in reports.items():
        row = re.sub(r"[^\w.=+-]+", "_", name).strip("_") or "row"
        for i, report in enumerate([reps] if isinstance(reps, Mapping) else reps):
            run = f"{report.get('experiment', 'run')}-seed{report.get('seed', i)}"
            target = out / RUN_FILES / table / row / run / "result.json"
            if str(target) in written:  # two reports of one row with one seed
                target = target.parent.with_name(f"{run}-{i}") / "result.json"
            written.append(write_json(target, run_copy(report)))
    return written


def write_markdown(path: Path, lines: Sequence[str]) -> str:
    """``lines`` as a text file, its paths named without the machine's layout.

    Args:
        path: the file written; its path is returned as a string.
        lines: the lines (joined with newlines; one final newline).
    """
    write_text(path, "\n".join(portable(list(lines))).rstrip() + "\n")
    return str(path)


def pyplot():
    """matplotlib's pyplot on the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def logged_rows(run_dir: str | Path) -> list[dict[str, str]]:
    """The rows of a run's CSV log (``RUN/logs/version_N/metrics.csv``, the latest version:
    a resumed run starts a new one); [] when the run has none.

    Args:
        run_dir: the run folder.
    """
    import csv

    logs = sorted(Path(run_dir).glob("logs/version_*/metrics.csv"),
                  key=lambda p: int(p.parent.name.split("_")[1]))
    if not logs:
        return []
    with logs[-1].open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def last_logged(run_dir: str | Path, keys: Sequence[str]) -> dict[str, float | None]:
    """The last value a run logged for each of ``keys`` (e.g. ``train/gam_loss``; None if
    never), from one read of its CSV log.

    Args:
        run_dir: the run folder (:func:`logged_rows`).
        keys: the logged columns wanted.
    """
    last: dict[str, float | None] = dict.fromkeys(keys)
    for row in logged_rows(run_dir):
        last.update({k: float(row[k]) for k in keys if row.get(k)})
    return last


def output_name(stem: str, tag: str | None) -> str:
    """``stem_tag``, or ``stem`` without a tag (an output file's name).

    Args:
        stem: the name's stem.
        tag: the analysis's tag (``--tag``); None or empty: none.
    """
    return f"{stem}_{tag}" if tag else stem


def questions_per_candidate(pool: RetrievalPool) -> dict[str, list[str]]:
    """Candidate id -> the distinct questions (pool order) whose answer is that sentence.

    Args:
        pool: the pool (its QA pairs).
    """
    groups: dict[str, list[str]] = {}
    for p in pool.pairs:
        qs = groups.setdefault(p.answer_id, [])
        if p.question not in qs:
            qs.append(p.question)
    return groups


def pick_answer(pool: RetrievalPool, answer: str | None = None, max_questions: int | None = None,
                min_questions: int = 2) -> tuple[Candidate, list[str]]:
    """An answer sentence and its questions (pool order).

    Args:
        pool: the pool.
        answer: a candidate id or the exact sentence text; None picks the sentence with the
            most distinct questions (ties: the first in pool order).
        max_questions: keep the first this many questions; None: all.
        min_questions: fewer questions is a ValueError.
    """
    by_id = {c.id: c for c in pool.candidates}
    groups = questions_per_candidate(pool)
    if answer is None:
        if not groups:
            raise ValueError(f"{pool.dataset}/{pool.pool} has no QA pairs")
        order = {c.id: i for i, c in enumerate(pool.candidates)}
        cid = min(groups, key=lambda c: (-len(groups[c]), order.get(c, len(order))))
    elif answer in by_id:
        cid = answer
    else:
        ids = [c.id for c in pool.candidates if c.text == answer and c.id in groups]
        if not ids:
            raise ValueError(f"answer {answer!r} is neither a candidate id nor the text of an "
                             "answer sentence of the pool")
        cid = max(ids, key=lambda c: len(groups[c]))
    questions = groups.get(cid, [])
    if max_questions:
        questions = questions[:max_questions]
    if len(questions) < min_questions:
        raise ValueError(f"answer {cid} has {len(questions)} question(s); this analysis needs "
                         f"at least {min_questions}")
    return by_id[cid], questions


def load_models(named: Sequence[tuple[str, str]]) -> dict[str, object]:
    """Exported dual-encoder folders, each loaded once (path -> the artefact of
    models/artifact.py).

    Args:
        named: ``(name, folder)`` pairs (:func:`parse_named`).
    """
    from ..models.artifact import load_artifact

    loaded: dict[str, object] = {}
    for _, folder in named:
        if folder not in loaded:
            loaded[folder] = load_artifact(folder)
    return loaded
