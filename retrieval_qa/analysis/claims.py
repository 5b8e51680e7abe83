"""What the results establish, computed from their committed records.

Each study folder ``results/<study>/`` has a ``claims.yaml``: its established figures, each
with the record it is computed from, so no figure is typed by hand::

    study: distill
    title: Distillation of the reranker into one dual encoder
    summary: "one MiniLM dual encoder: {single} dev MRR (3 seeds, CPU profile)"
    claims:
      - id: single
        what: the distilled dual encoder
        figure: {kind: mean, metric: mrr, records: [records/a.questions.jsonl.gz, ...]}
        seeds: [42, 1, 2]
        rule: the recipe fixed on the validation side before any test evaluation
        family: distill          # its looks in results/ledger.jsonl
        command: make reproduce-distill SEED=S

Figure kinds (paths relative to the study folder):

* ``mean``: the mean of ``metric`` over per-question records (one a seed), ``± the sample
  standard deviation`` over seeds when there are several;
* ``paired``: ``b - a`` question by question (records ``a`` and ``b``, seeds averaged per
  question as ``rqa compare`` does), with its paired bootstrap 95 % interval;
* ``json``: the mean (± std) of ``key`` (dotted) over JSON ``files``, times ``scale``;
* ``sum``: the sum of column ``column`` of a tab-separated ``file``, times ``scale``.

``pool`` is read from the records (a subset of a pool must say so in ``subset``, and a figure
on a subset may not carry a ``goal``, which is set on the whole pool). ``looks`` is the number
of configurations of the claim's ``family`` evaluated on its test pool, counted from the
committed ledger (:mod:`retrieval_qa.evaluation.ledger`).

:mod:`.results_tables` renders them into the READMEs (``rqa results``).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from ..errors import InputFileError

CLAIMS_FILE = "claims.yaml"
LEDGER = "ledger.jsonl"
#: every question of the test pools that results report on; a record with fewer is a subset
FULL_POOLS = {("reqa_squad", "dev"): 10539, ("reqa_squad", "train"): 87355,
              ("multireqa_squad", "test"): 10485,
              ("multireqa_relationextraction", "test"): 2945}
KINDS = ("mean", "paired", "json", "sum")


@dataclass
class Figure:
    """A claim's number.

    Attributes:
        value: the figure.
        interval: ``("std", s)`` (over seeds), ``("ci", low, high)`` (paired bootstrap) or
            None.
        text: the figure as the tables print it.
        pool: the records' ``dataset/pool`` (None for a report's figure).
        questions: how many questions the records hold (None for a report's figure).
    """

    value: float
    interval: tuple | None
    text: str
    pool: str | None = None
    questions: int | None = None


@dataclass
class Claim:
    """One established figure of a study (see the module's docstring for the keys).

    Attributes:
        study: the study's name (its folder under ``results/``).
        folder: the study's folder; the figure's files are relative to it.
        id: the claim's id in its study.
        what: what the figure is, in words.
        figure: how it is computed (``kind`` and its keys).
        seeds: the training seeds behind it.
        rule: the rule that chose it on the validation side.
        family: the ledger family whose looks at its test pool are counted.
        command: the command that made its records.
        subset: how its records are a subset of their pool; None: the whole pool.
        goal: a goal set on the whole pool and whether it is met.
        note: anything else a reader needs.
    """

    study: str
    folder: Path
    id: str
    what: str
    figure: dict
    seeds: list = field(default_factory=list)
    rule: str = ""
    family: str | None = None
    command: str = ""
    subset: str | None = None
    goal: str | None = None
    note: str | None = None

    @property
    def key(self) -> str:
        return f"{self.study}.{self.id}"

    def files(self) -> list[Path]:
        f = self.figure
        names = f.get("records", []) + f.get("a", []) + f.get("b", []) + f.get("files", []) \
            + ([f["file"]] if "file" in f else [])
        return [self.folder / n for n in names]


@dataclass
class Study:
    """One ``results/<study>/claims.yaml``.

    Attributes:
        name: the study.
        folder: its folder under ``results/``.
        title: its title in the tables.
        summary: README.md's one-line summary, with ``{claim id}`` placeholders.
        claims: its :class:`Claim` s.
        order: its place in README.md's table.
    """

    name: str
    folder: Path
    title: str
    summary: str
    claims: list[Claim]
    order: int = 100


def _error(path: Path, problem: str) -> InputFileError:
    return InputFileError("claims file", path, problem,
                          "see retrieval_qa/analysis/claims.py for the keys a claim takes")


def load_study(path: Path) -> Study:
    """One ``claims.yaml``, checked: known figure kinds, files that exist, unique ids.

    Args:
        path: the study's ``claims.yaml``.
    """
    from omegaconf import OmegaConf

    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    if not isinstance(raw, dict) or "claims" not in raw or "study" not in raw:
        raise _error(path, "needs `study` and `claims`")
    claims, seen = [], set()
    for n, item in enumerate(raw["claims"], 1):
        try:
            claim = Claim(study=raw["study"], folder=path.parent, **item)
        except TypeError as e:
            raise _error(path, f"claim {n}: {e}") from None
        if claim.id in seen:
            raise _error(path, f"claim {n}: id {claim.id!r} repeated")
        seen.add(claim.id)
        if claim.figure.get("kind") not in KINDS:
            raise _error(path, f"claim {claim.id!r}: figure kind {claim.figure.get('kind')!r}"
                               f" is not one of {KINDS}")
        missing = [str(p.relative_to(path.parent)) for p in claim.files() if not p.is_file()]
        if missing:
            raise _error(path, f"claim {claim.id!r}: no committed record {missing}")
        if claim.subset and claim.goal:
            raise _error(path, f"claim {claim.id!r} is on a subset ({claim.subset}) and "
                               f"names a goal ({claim.goal}): a goal is set on the whole pool")
        claims.append(claim)
    return Study(raw["study"], path.parent, raw.get("title", raw["study"]),
                 raw.get("summary", ""), claims, int(raw.get("order", 100)))


def load_studies(results: Path) -> list[Study]:
    """Every ``results/*/claims.yaml``, in the order their ``order`` keys give.

    Args:
        results: the ``results/`` folder.
    """
    studies = [load_study(p) for p in Path(results).glob(f"*/{CLAIMS_FILE}")]
    return sorted(studies, key=lambda s: (s.order, s.name))


@cache
def read_record(path: Path):
    """A per-question record, read once per process.

    Args:
        path: the record (``*.questions.jsonl.gz``).
    """
    from ..evaluation.per_question import read_per_question

    return read_per_question(path)


def _dotted(obj, key: str, path: Path):
    for part in key.split("."):
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            raise InputFileError("claims record", path, f"has no key {key!r}",
                                 "name a key the file holds")
    return float(obj)


def _items(data, f: dict, path: Path) -> list:
    """The JSON objects a figure reads: the file itself, or the items of its list ``list``
    (dotted) whose keys equal ``where``'s."""
    if "list" not in f:
        return [data]
    items = data
    for part in f["list"].split("."):
        if not isinstance(items, dict) or part not in items:
            raise InputFileError("claims record", path, f"has no list {f['list']!r}",
                                 "name a list the file holds")
        items = items[part]
    where = f.get("where", {})
    return [i for i in items if all(i.get(k) == v for k, v in where.items())]


def _fmt(value: float, digits: int, sign: bool = False) -> str:
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _spread(values: list[float], digits: int, unit: str = "") -> tuple[float, tuple | None, str]:
    mean = float(np.mean(values))
    if len(values) == 1:
        return mean, None, _fmt(mean, digits) + unit
    std = float(np.std(values, ddof=1))
    return mean, ("std", std), f"{_fmt(mean, digits)} ± {_fmt(std, digits)}{unit}"


def _pool_of(records, given: str | None = None) -> tuple[str, int]:
    """The records' pool and question count (``given``: the pool of records whose header does
    not name it, converted from a run file)."""
    heads = {(f"{r.header['dataset']}/{r.header['pool']}" if "dataset" in r.header else given,
              len(r.ids)) for r in records}
    if len(heads) != 1 or None in next(iter(heads)):
        raise ValueError(f"records of one figure must name one pool (a `pool:` in the figure "
                         f"names it for records that do not): {sorted(map(str, heads))}")
    return heads.pop()


_FIGURES: dict[str, Figure] = {}


def compute(claim: Claim) -> Figure:
    """The claim's figure, from its records (computed once per process and figure).

    Args:
        claim: a :class:`Claim`.
    """
    key = json.dumps([str(claim.folder), claim.figure], sort_keys=True)
    if key not in _FIGURES:
        _FIGURES[key] = _compute(claim)
    f = _FIGURES[key]
    return Figure(f.value, f.interval, f.text, f.pool, f.questions)


def _compute(claim: Claim) -> Figure:
    f, digits = claim.figure, int(claim.figure.get("digits", 2))
    unit = f.get("unit", "")
    if f["kind"] == "mean":
        records = [read_record(p) for p in claim.files()]
        metric = f.get("metric", "mrr")
        value, interval, text = _spread([r.metrics()[metric] for r in records], digits)
        return Figure(value, interval, text, *_pool_of(records, f.get("pool")))
    if f["kind"] == "paired":  # rqa compare's numbers: seeds averaged per question
        from . import significance as sig
        from .compare import Setting, _check_paired, scores

        a = [read_record(claim.folder / n) for n in f["a"]]
        b = [read_record(claim.folder / n) for n in f["b"]]
        _check_paired([Setting("a", a), Setting("b", b)])
        metric = [f.get("metric", "mrr")]
        diff = (np.mean([scores(r, metric) for r in b], axis=0)
                - np.mean([scores(r, metric) for r in a], axis=0))[:, 0]
        lo, hi = sig.paired_bootstrap(diff, seed=sig.SEED)
        value = float(diff.mean())
        text = f"{_fmt(value, digits, True)} [{_fmt(lo, digits, True)}, " \
               f"{_fmt(hi, digits, True)}]"
        return Figure(value, ("ci", lo, hi), text, *_pool_of(a + b, f.get("pool")))
    scale = float(f.get("scale", 1.0))
    if f["kind"] == "json":
        values, stds = [], []
        for p in claim.files():
            for item in _items(json.loads(p.read_text(encoding="utf-8")), f, p):
                values.append(scale * _dotted(item, f["key"], p))
                if "std_key" in f:
                    stds.append(scale * _dotted(item, f["std_key"], p))
        if not values:
            raise ValueError(f"{claim.key}: no item of {f.get('list')} matches {f['where']}")
        if stds:  # an aggregate stored with its spread (a sweep table's mean and std)
            if len(values) != 1:
                raise ValueError(f"{claim.key}: std_key needs exactly one matching item")
            return Figure(values[0], ("std", stds[0]), f"{_fmt(values[0], digits)} ± "
                                                       f"{_fmt(stds[0], digits)}{unit}")
        value, interval, text = _spread(values, digits, unit)
        return Figure(value, interval, text)
    path = claim.folder / f["file"]  # sum
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    value = scale * sum(float(r[f["column"]]) for r in rows)
    return Figure(value, None, _fmt(value, digits) + unit)


def pool_text(claim: Claim, figure: Figure) -> str:
    """The pool column: the records' pool, and the subset when it is one (a record with fewer
    questions than its whole test pool that does not say it is a subset is an error).

    Args:
        claim: the claim.
        figure: its computed :class:`Figure`.
    """
    pool = claim.figure.get("pool") or figure.pool or "–"
    if figure.pool is None:
        return pool + (f", {claim.subset}" if claim.subset else "")
    dataset, name = figure.pool.split("/")
    full = FULL_POOLS.get((dataset, name))
    if full is not None and figure.questions < full and not claim.subset:
        raise ValueError(f"{claim.key}: its records hold {figure.questions} of {full} "
                         f"questions of {figure.pool}: say `subset:` in the claim")
    if claim.subset:
        return f"{pool}, subset: {claim.subset} ({figure.questions:,} q)"
    return f"{pool} ({figure.questions:,} q)"


def ledger_pool(pool: str, subset: bool) -> str:
    """A pool as the ledger's summary names it (a subset named in the pool, such as
    ``dev[qpa>=9]``, is the pool's subset).

    Args:
        pool: ``dataset/pool``.
        subset: whether the look is at a subset of it.
    """
    base = pool.split("[", 1)[0]
    return base + (" (subset)" if subset or "[" in pool else "")


def looks_text(claim: Claim, figure: Figure, looks: dict) -> str:
    """The test-looks column: the configurations of the claim's family evaluated on its pool.

    Args:
        claim: the claim.
        figure: its computed :class:`Figure`.
        looks: :func:`~.results_tables.ledger_looks`.
    """
    if not claim.family:
        return "–"
    pool = ledger_pool(figure.pool or claim.figure.get("pool", ""), bool(claim.subset))
    n = looks.get((claim.family, pool))
    if n is None:
        raise ValueError(f"{claim.key}: family {claim.family!r} has no look at {pool} in "
                         f"results/{LEDGER}")
    return str(n)
