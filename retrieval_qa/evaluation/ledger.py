"""The ledger of test-pool looks: every evaluation of a test pool, by any command, on record.

The protocol's rule (docs/evaluation.md): test pools report, validation chooses. A reader of a
headline can only judge it when they know how many configurations were evaluated on its test
pool before it was kept, so every evaluation of a test pool appends one JSON line here:

    {"format": "rqa-ledger/1", "id": "<12 hex>", "time": "2026-12-03T18:01:02Z",
     "commit": "4de4355", "command": "rqa evaluate --pipeline ...", "kind": "pipeline",
     "name": "hybrid_ft_rerank", "family": "hybrid_ft_rerank",
     "configuration": "<12 hex>", "seed": 42, "overrides": ["reranker.top_k=10"],
     "checkpoint": null, "dataset": "reqa_squad", "pool": "dev", "questions": 10539,
     "subset": null, "metrics": {"mrr": 84.07, ...}, "ranks": "<16 hex>", "record": "..."}

``configuration`` is a digest of the settings that ran, the seed and the output paths left
out: two seeds of one recipe are one configuration, two depths of a reranker are two.
``family`` groups the configurations that compete for one headline (default: the experiment
or pipeline name; ``--family`` or ``$RQA_LEDGER_FAMILY`` names it otherwise). ``ranks`` is a
digest of the per-question ranks, so a committed record names the look it came from
(:func:`ranks_digest`). Validation sides (pools taken from a training file) are not test
pools and are not logged.

Where: ``$RQA_LEDGER``, else ``runs/ledger.jsonl`` under the working folder (git-ignored).
The looks behind ``results/`` are committed in ``results/ledger.jsonl``; ``rqa ledger``
summarises a ledger (:func:`summarise`).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..errors import InputFileError

FORMAT = "rqa-ledger/1"
ENV = "RQA_LEDGER"
FAMILY_ENV = "RQA_LEDGER_FAMILY"
DEFAULT = Path("runs") / "ledger.jsonl"
#: settings that do not make another configuration (where things are written, the seed,
#: how many threads or workers, progress output)
NOT_CONFIGURATION = frozenset({
    "seed", "output_dir", "output", "run_dir", "pipeline_dir", "work_dir", "run_file", "threads",
    "num_workers", "progress", "quiet", "data_dir", "cache_dir", "resume", "wandb",
    "logger", "description"})
#: the metrics a ledger line keeps
METRICS = ("mrr", "r@1", "r@5", "r@10", "doc_mrr", "doc_r@1")
REQUIRED = ("format", "id", "time", "kind", "name", "family", "configuration", "dataset",
            "pool", "questions", "metrics")


def is_test_pool(dataset: str, pool: str) -> bool:
    """Whether ``dataset/pool`` is a test pool: it reports and chooses nothing (the ReQA SQuAD
    dev and train pools, every MultiReQA test pool, SQuAD dev's paragraphs). A validation side
    (``<pool>-val...``), a MultiReQA training pool and a user's own training file are not.

    Args:
        dataset: the dataset's name (``reqa_squad``, ``multireqa_<name>``, ...).
        pool: the pool's name.

    Example:

        >>> is_test_pool("reqa_squad", "dev"), is_test_pool("reqa_squad", "train-val")
        (True, False)
        >>> is_test_pool("multireqa_relationextraction", "test")
        True
    """
    pool = pool.split("[", 1)[0]  # a subset named in the pool: dev[qpa>=9]
    if dataset == "reqa_squad":
        return pool in ("dev", "train")
    if dataset.startswith("multireqa_"):
        return pool == "test"
    if dataset == "squad_paragraphs":
        return pool == "dev"
    return pool == "test"


def ledger_path() -> Path:
    """The ledger this process appends to: ``$RQA_LEDGER``, else ``runs/ledger.jsonl``."""
    value = os.environ.get(ENV)
    return Path(value).expanduser() if value else DEFAULT


def _plain(value):
    """Settings as JSON-able plain values (OmegaConf containers, paths, tuples)."""
    with contextlib.suppress(ImportError):
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, (DictConfig, ListConfig)):
            value = OmegaConf.to_container(value, resolve=False)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _drop_paths(value):
    if isinstance(value, dict):
        return {k: _drop_paths(v) for k, v in value.items() if k not in NOT_CONFIGURATION}
    if isinstance(value, list):
        return [_drop_paths(v) for v in value]
    return value


def configuration_digest(settings) -> str:
    """12 hex digits naming a configuration: ``settings`` (a dict or OmegaConf config) with
    the keys of :data:`NOT_CONFIGURATION` dropped at every level, so two seeds of one recipe
    share a digest.

    Args:
        settings: what ran (a composed config, a pipeline's settings, a model's settings).

    Example:

        >>> a = configuration_digest({"lr": 1e-3, "seed": 1, "output_dir": "runs/a"})
        >>> a == configuration_digest({"lr": 1e-3, "seed": 2, "output_dir": "runs/b"})
        True
        >>> a == configuration_digest({"lr": 2e-3, "seed": 1})
        False
    """
    text = json.dumps(_drop_paths(_plain(settings)), sort_keys=True, default=str)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def ranks_digest(ranks) -> str:
    """16 hex digits naming the per-question ranks of one evaluation (float64, in pool
    order): a committed per-question record and the ledger line of the look that wrote it
    share it.

    Args:
        ranks: ``[Q]`` ranks (a tensor, an array or a list).
    """
    if hasattr(ranks, "detach"):
        ranks = ranks.detach().cpu().numpy()
    data = np.ascontiguousarray(np.asarray(ranks, dtype=np.float64))
    return hashlib.sha1(data.tobytes()).hexdigest()[:16]


def _commit() -> str | None:
    """This checkout's commit (``+dirty`` when tracked files changed), None outside git."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=True)
        dirty = subprocess.run(["git", "-C", str(root), "diff", "--quiet", "HEAD", "--",
                                "retrieval_qa", "conf"], capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.returncode == 1 else "")


def _command() -> str:
    from ..portable_paths import portable

    argv = list(sys.argv)
    if argv and argv[0].endswith(("__main__.py", "/rqa")):
        argv[0] = "rqa"
    return portable(" ".join(argv))


def record(*, dataset: str, pool: str, metrics: dict, questions: int, kind: str, name: str,
           settings=None, seed: int | None = None, overrides: Sequence[str] = (),
           checkpoint: str | None = None, ranks=None, record_file: str | Path | None = None,
           subset: str | None = None, family: str | None = None,
           path: str | Path | None = None) -> dict | None:
    """Append one look to the ledger when ``dataset/pool`` is a test pool; return the line
    written (None for a validation side or another pool that chooses).

    Args:
        dataset: the evaluated dataset.
        pool: the evaluated pool.
        metrics: the evaluation's metrics (percent); :data:`METRICS` are kept.
        questions: how many questions were evaluated.
        kind: what ran: ``evaluate`` (a model), ``pipeline``, ``train`` (a run's test) ...
        name: the model, experiment or pipeline.
        settings: every setting that ran (digested by :func:`configuration_digest`).
        seed: the training seed, when there is one.
        overrides: the command line's KEY=VALUE settings.
        checkpoint: the evaluated model's folder.
        ranks: the per-question ranks (digested by :func:`ranks_digest`).
        record_file: the per-question record written, if any.
        subset: how the questions are a subset of the pool (e.g. ``"1000 of 10539 questions,
            seed 13"``); None: the whole pool.
        family: the headline this look competes for; default ``$RQA_LEDGER_FAMILY``, else
            ``name``.
        path: the ledger; default :func:`ledger_path`.
    """
    if not is_test_pool(dataset, pool):
        return None
    from ..portable_paths import portable, portable_path

    if "[" in pool:  # a subset named in the pool: the pool's own name, the subset beside it
        pool, rest = pool.split("[", 1)
        subset = subset or f"[{rest}"

    entry = {"format": FORMAT,
             "time": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
             "commit": _commit(), "command": _command(), "kind": kind, "name": name,
             "family": family or os.environ.get(FAMILY_ENV) or name,
             "configuration": configuration_digest(
                 {"kind": kind, "name": name, "settings": settings or {},
                  "overrides": [o for o in overrides
                                if o.split("=", 1)[0].split(".")[-1] not in NOT_CONFIGURATION]}),
             "seed": seed, "overrides": list(overrides),
             "checkpoint": portable_path(str(Path(checkpoint).resolve())) if checkpoint
             else None,
             "dataset": dataset, "pool": pool, "questions": int(questions), "subset": subset,
             "metrics": {k: round(float(metrics[k]), 4) for k in METRICS if k in metrics},
             "ranks": ranks_digest(ranks) if ranks is not None else None,
             "record": portable_path(str(Path(record_file).resolve())) if record_file
             else None}
    entry["id"] = hashlib.sha1(json.dumps(entry, sort_keys=True).encode()).hexdigest()[:12]
    entry = portable(entry)
    append(entry, path)
    return entry


def append(entry: dict, path: str | Path | None = None) -> Path:
    """Append one line to the ledger under an exclusive lock (several processes may log at
    once); the line is flushed to disk before the lock is released.

    Args:
        entry: the ledger line (a JSON object).
        path: the ledger; default :func:`ledger_path`.
    """
    path = Path(path) if path is not None else ledger_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(entry, sort_keys=True) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        try:
            import fcntl

            fcntl.flock(f, fcntl.LOCK_EX)
        except (ImportError, OSError):  # a platform or filesystem without locks
            pass
        f.write(line)
        f.flush()
        os.fsync(f.fileno())
    return path


def read(path: str | Path) -> list[dict]:
    """Every line of a ledger, each checked: a line that is not a ledger entry is an error
    naming the file and the line.

    Args:
        path: the ledger file.
    """
    path = Path(path)
    if not path.is_file():
        raise InputFileError("ledger", path, "does not exist",
                             "give a ledger file (runs/ledger.jsonl, results/ledger.jsonl)")
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputFileError("ledger", path, f"line {n} is not JSON ({e.msg})",
                                     "remove or repair that line") from None
            missing = [k for k in REQUIRED if k not in entry] if isinstance(entry, dict) \
                else list(REQUIRED)
            if missing or entry.get("format") != FORMAT:
                raise InputFileError("ledger", path, f"line {n} is not a {FORMAT} entry "
                                     f"(missing {missing})", "remove or repair that line")
            out.append(entry)
    return out


def summarise(entries: Iterable[dict], family: str | None = None,
              kept: dict[str, str] | None = None) -> list[dict]:
    """One row per (family, test pool): how many configurations and evaluations were looked
    at there, over which seeds, the range of their MRR, and which look was kept.

    Args:
        entries: ledger lines (:func:`read`).
        family: only this family; None: every family.
        kept: ``{ranks digest or entry id: headline}`` of the looks the results keep
            (``results/claims.yaml``); None: none marked.

    Example:

        >>> lines = [{"family": "f", "dataset": "reqa_squad", "pool": "dev", "seed": s,
        ...           "configuration": c, "metrics": {"mrr": m}, "questions": 10,
        ...           "subset": None, "id": f"{c}{s}", "ranks": None}
        ...          for c, s, m in (("a", 1, 70.0), ("a", 2, 71.0), ("b", 1, 72.0))]
        >>> row = summarise(lines)[0]
        >>> row["configurations"], row["evaluations"], row["mrr_range"]
        (2, 3, [70.0, 72.0])
    """
    kept = kept or {}
    groups: dict[tuple, list[dict]] = {}
    for e in entries:
        if family is not None and e["family"] != family:
            continue
        pool = f"{e['dataset']}/{e['pool']}" + (" (subset)" if e.get("subset") else "")
        groups.setdefault((e["family"], pool), []).append(e)
    rows = []
    for (fam, pool), group in sorted(groups.items()):
        mrrs = [e["metrics"]["mrr"] for e in group if "mrr" in e["metrics"]]
        marks = sorted({kept[k] for e in group for k in (e.get("ranks"), e["id"])
                        if k and k in kept})
        rows.append({"family": fam, "pool": pool,
                     "configurations": len({e["configuration"] for e in group}),
                     "evaluations": len(group),
                     "seeds": sorted({e["seed"] for e in group if e.get("seed") is not None}),
                     "mrr_range": [min(mrrs), max(mrrs)] if mrrs else None,
                     "kept": marks})
    return rows

