"""The committed seed references of a paper table's rows: this repository's own runs of a row
on today's pools, declared by the row's ``reference:`` in ``conf/tables/<table>.yaml``.
``make reproduce-table2`` shows one beside a row it computes when no exact-setting result
(``results/table2/<row>-<pool>.json``) exists; the overview notebook plots them.

A reference names either

* per-question records, one a seed (``records:`` a path with ``{seed}``, and ``seeds:``): the
  metrics are recomputed from their ranks (:func:`~retrieval_qa.evaluation.per_question.
  read_per_question`), then averaged, with the sample std over the seeds; or
* a row of a sweep table (``table:`` and ``row:``, the row's ``label``): its stored mean and
  sample std, and its seeds.

``train_pairs`` is how many training pairs its runs learned from. ``differs`` says how its runs'
settings differ from the row's experiment under the ``cpu`` profile (none: the same settings,
seeds aside); it is shown with the reference, which is then no check of a reproduction.
``pool`` is the evaluation pool (default dev). Paths are the repository's (``results/...``);
read from another results folder, ``results/`` stands for that folder.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataFormatError, InputFileError

METRICS = ("mrr", "r@1", "r@5")
FIX = "restore the committed file (git restore PATH), or correct the row's `reference:` in {conf}"


@dataclass
class SeedReference:
    """A row's seed mean (see the module docstring).

    Attributes:
        row: the paper table's row.
        pool: the evaluation pool (``dev`` by default).
        metrics: the mean over the seeds, by metric.
        std: the sample std over the seeds, by metric (0 for one seed).
        seeds: the seeds.
        train_pairs: the training pairs its runs learned from; None: not declared.
        files: the declared paths (repository-relative), one a seed or one table.
        path: them in one string: records as ``..._seed{1,2,3}...``, a table's row.
        differs: how its runs' settings differ from the row's experiment; None: they do not.
        profile: the profile ``differs`` is relative to.
    """

    row: str
    pool: str
    metrics: dict[str, float]
    std: dict[str, float]
    seeds: list[int]
    train_pairs: int | None
    files: list[str]       # the declared paths (repository-relative), one a seed or one table
    path: str              # them in one string: records as ``..._seed{1,2,3}...``, a table's row
    differs: str | None = None
    profile: str = "cpu"

    def about(self) -> str:
        """Its seeds, training pairs and pool, and how its settings differ when they do."""
        seeds = ", ".join(map(str, self.seeds))
        pairs = f"; {self.train_pairs:,} training pairs" if self.train_pairs else ""
        other = f"; other settings than the {self.profile} profile: {self.differs}" \
            if self.differs else ""
        return f"seeds {seeds}{pairs}; {self.pool} pool{other}"

    def source(self) -> str:
        """Where it comes from, with :meth:`about`."""
        return f"{self.path} ({self.about()})"


def _under(path: str, results_dir: Path) -> Path:
    """A declared ``results/...`` path inside ``results_dir``."""
    rest = Path(path)
    if rest.parts and rest.parts[0] == "results":
        rest = Path(*rest.parts[1:])
    return results_dir / rest


def _records(spec, name: str, pool: str, results_dir: Path, conf: str
             ) -> tuple[dict, dict, list[int], list[str], str]:
    from ..evaluation.per_question import read_per_question

    seeds = [int(s) for s in spec["seeds"]]
    pattern = str(spec["records"])
    files = [pattern.format(seed=s) for s in seeds]
    per_seed = []
    for declared in files:
        path = _under(declared, results_dir)
        try:
            record = read_per_question(path)
        except DataFormatError as e:
            raise InputFileError(f"the committed reference of {name}", path,
                                 f"{e.record}: {e.problem}", FIX.format(conf=conf)) from None
        where = f"{record.header.get('dataset')}/{record.header.get('pool')}"
        if where != f"reqa_squad/{pool}":
            raise InputFileError(f"the committed reference of {name}", path,
                                 f"it is a record of {where}, not of reqa_squad/{pool}",
                                 FIX.format(conf=conf))
        per_seed.append(record.metrics())
    metrics = {m: statistics.fmean(r[m] for r in per_seed) for m in METRICS}
    std = {m: statistics.stdev(r[m] for r in per_seed) if len(per_seed) > 1 else 0.0
           for m in METRICS}
    shown = pattern.replace("{seed}", "{" + ",".join(map(str, seeds)) + "}") \
        if len(seeds) > 1 else files[0]
    return metrics, std, seeds, files, shown


def _table_row(spec, name: str, pool: str, results_dir: Path, conf: str
               ) -> tuple[dict, dict, list[int], list[str], str]:
    declared = str(spec["table"])
    path = _under(declared, results_dir)
    fix = FIX.format(conf=conf)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputFileError(f"the committed reference of {name}", path,
                             f"not a sweep table ({e})", fix) from None
    rows = [r for r in (data.get("rows") or []) if isinstance(r, dict)
            and r.get("label") == spec["row"]]
    if len(rows) != 1:
        raise InputFileError(f"the committed reference of {name}", path,
                             f"{len(rows)} rows labelled {spec['row']!r}, not one", fix)
    row = rows[0]
    if row.get("test_pools") != [f"reqa_squad/{pool}"]:
        raise InputFileError(f"the committed reference of {name}", path,
                             f"row {spec['row']!r} was tested on {row.get('test_pools')}, not "
                             f"reqa_squad/{pool}", fix)
    try:
        metrics = {m: float(row[m]["mean"]) for m in METRICS}
        std = {m: float(row[m]["std"] or 0.0) for m in METRICS}
    except (KeyError, TypeError, ValueError):
        raise InputFileError(f"the committed reference of {name}", path,
                             f"row {spec['row']!r} lacks a mean and std of {', '.join(METRICS)}",
                             fix) from None
    seeds = [int(s) for s in row.get("seeds") or []]
    if "seeds" in spec and [int(s) for s in spec["seeds"]] != seeds:
        raise InputFileError(f"the committed reference of {name}", path,
                             f"row {spec['row']!r} holds seeds {seeds}, the table declares "
                             f"{list(spec['seeds'])}", fix)
    return metrics, std, seeds, [declared], f"{declared} row {spec['row']}"


def read_reference(name: str, spec, results_dir: str | Path,
                   conf: str = "conf/tables") -> SeedReference:
    """Row ``name``'s reference ``spec`` (its ``reference:`` block) read from ``results_dir``
    (the repository's ``results/`` or a copy). A missing file is a FileNotFoundError; a damaged
    one, or one of another pool, an InputFileError naming it and the fix.

    Args:
        name: the row's name.
        spec: its ``reference:`` block.
        results_dir: the results folder (``results/`` in declared paths stands for it).
        conf: where the tables are, named in the errors' fix.
    """
    results_dir = Path(results_dir)
    pool = str(spec.get("pool", "dev"))
    read = _records if "records" in spec else _table_row
    metrics, std, seeds, files, shown = read(spec, name, pool, results_dir, conf)
    pairs = spec.get("train_pairs")
    return SeedReference(row=name, pool=pool, metrics=metrics, std=std, seeds=seeds,
                         train_pairs=int(pairs) if pairs is not None else None, files=files,
                         path=shown, differs=spec.get("differs"),
                         profile=str(spec.get("profile", "cpu")))


def declared_files(spec) -> list[str]:
    """The repository paths a ``reference:`` block reads.

    Args:
        spec: the ``reference:`` block (``records`` and ``seeds``, or ``table``).

    Example:

        >>> declared_files({"records": "results/x_seed{seed}.json", "seeds": [1, 2]})
        ['results/x_seed1.json', 'results/x_seed2.json']
    """
    if "records" in spec:
        return [str(spec["records"]).format(seed=int(s)) for s in spec["seeds"]]
    return [str(spec["table"])]


def table_references(table, results_dir: str | Path, conf: str = "conf/tables",
                     missing=None) -> dict[tuple[str, str], SeedReference]:
    """``{(row, pool): SeedReference}`` of the rows of ``table`` (a loaded conf/tables file)
    that declare a ``reference:``; one whose files are not in ``results_dir`` is left out.

    Args:
        table: a loaded conf/tables file.
        results_dir: the results folder.
        conf: where the tables are, named in the errors' fix.
        missing: called as ``missing(row, path)`` for a reference left out; None: not told.
    """
    found = {}
    for row in table.rows:
        spec = row.get("reference")
        if not spec:
            continue
        absent = [p for p in declared_files(spec) if not _under(p, Path(results_dir)).is_file()]
        if absent:
            if missing is not None:
                missing(row.name, absent[0])
            continue
        ref = read_reference(row.name, spec, results_dir, conf)
        found[(row.name, ref.pool)] = ref
    return found
