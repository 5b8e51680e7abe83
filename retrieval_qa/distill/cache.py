"""The teacher-score folder (``data.teacher.output``): its layout, its key and its files.

Layout::

    settings.json        the key (:func:`cache_key`): what the scores depend on
    first_stage/         the first stage's run files (the pipeline's layout), its cache
    lists.json.gz        every question's list and what the first stage did
    shards/00000.json.gz the teacher's scores of questions [0, shard_questions), ...
    teacher.json         written last: the summary of a finished folder

The key holds the teacher's identity (a digest of its export's files), the questions it was
trained on (its draw, :mod:`.questions`), the first stage's identity (each retriever's
settings with a digest of its model, the fusion and tuning settings, ``top_k``), the
training side and the distillation settings (questions, seed, list size, shard size). Not
the batch sizes or the device, which change float sums in their last bits only. A folder of
another key is refused (:class:`~retrieval_qa.errors.SettingsMismatchError`). Every file is
written atomically (:mod:`retrieval_qa.written`) and bound to the key's digest; the lists
file and each shard also to the lists they hold, so nothing of other settings or other lists
is ever read as this folder's.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
from pathlib import Path

from ..errors import InputFileError, SettingsMismatchError, UsageError
from ..pipeline.composition import load_pipeline
from ..written import Damaged, atomic_path, check, read_back, read_json
from .questions import check_same_side, reranker_draw

FORMAT = 1
SETTINGS, LISTS, SUMMARY = "settings.json", "lists.json.gz", "teacher.json"
SHARDS, FIRST_STAGE = "shards", "first_stage"
#: the command that writes the folder
COMMAND = "rqa prepare experiment=distill profile=... [key=value ...]"


def teacher_folder(teacher: dict) -> Path:
    """The teacher's export: ``teacher.reranker``, else the pipeline's reranker.

    Args:
        teacher: the ``data.teacher`` block (conf/data/distill.yaml): its ``reranker`` and
            ``pipeline``.
    """
    folder = teacher["reranker"]
    if folder is None:
        cfg = load_pipeline(teacher["pipeline"])
        if cfg.reranker is None:
            raise UsageError(f"data.teacher.pipeline={teacher['pipeline']} has no reranker "
                             "(fix: name a pipeline with a reranker, or give "
                             "data.teacher.reranker=FOLDER)")
        folder = cfg.reranker.checkpoint
    if not Path(folder).is_dir():
        raise InputFileError("teacher", folder, "is not a folder", "train the reranker first "
                             "(python -m retrieval_qa.classifiers.train_reranker output=...)")
    return Path(folder)


def cache_key(teacher: dict, data: dict) -> dict:
    """What the teacher's scores depend on (see the module docstring).

    Args:
        teacher: the ``data.teacher`` block (conf/data/distill.yaml).
        data: the data block (its training side: ``train_dataset``, ``train_pool``,
            ``val_fraction``, ``split_seed``).
    """
    from ..mining.classifier_data import artifact_digest

    cfg = load_pipeline(teacher["pipeline"])
    for spec in cfg.retrievers:
        if getattr(spec, "checkpoint", None) is not None and not Path(spec.checkpoint).is_dir():
            raise InputFileError(f"data.teacher.pipeline={teacher['pipeline']}",
                                 spec.checkpoint, f"the model of its stage {spec.name!r} is "
                                 "not a folder", "export or train it first (see the pipeline "
                                 "config's comments)")
    folder = teacher_folder(teacher)
    draw = reranker_draw(folder)
    check_same_side(draw, data)
    key = {"format": FORMAT,
           "teacher": {"model": artifact_digest(folder)},
           "teacher_training_questions": draw,
           "first_stage": {"pipeline": cfg.name, "top_k": cfg.top_k,
                           "stages": {s.name: s.run_settings(cfg.top_k)
                                      for s in cfg.retrievers},
                           "fusion": dataclasses.asdict(cfg.fusion),
                           "tuning": dataclasses.asdict(cfg.tuning)},
           "questions": {"dataset": data["train_dataset"], "pool": data["train_pool"],
                         "val_fraction": data["val_fraction"],
                         "split_seed": data["split_seed"], "count": teacher["questions"],
                         "seed": teacher["seed"]},
           "list_size": teacher["list_size"], "shard_questions": teacher["shard_questions"]}
    return json.loads(json.dumps(key))  # as JSON holds it (tuples as lists)


def digest(obj) -> str:
    """The sha256 hex digest of ``obj`` as JSON with sorted keys.

    Args:
        obj: a JSON-serialisable object.
    """
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def write_json_gz(path: str | Path, obj) -> None:
    """``obj`` as gzipped JSON, written atomically.

    Args:
        path: the file.
        obj: a JSON-serialisable object.
    """
    with atomic_path(path) as tmp, gzip.open(tmp, "wt", encoding="utf-8") as f:
        json.dump(obj, f)


def read_json_gz(path: str | Path, key: dict, required: tuple[str, ...]) -> dict:
    """A gzipped JSON object of this folder's format and key, or :class:`Damaged`.

    Args:
        path: the file.
        key: the folder's key (:func:`cache_key`); the file must hold its digest.
        required: the keys the object must have.
    """
    def read(p: Path):
        with gzip.open(p, "rt", encoding="utf-8") as f:
            return json.load(f)

    obj = read_back(path, read, "gzipped JSON")
    check(isinstance(obj, dict), path, "not a JSON object")
    check(obj.get("format") == FORMAT, path, f"format {obj.get('format')!r}; this version "
          f"reads {FORMAT}")
    check(obj.get("key") == digest(key), path, "written under other settings")
    missing = [k for k in required if k not in obj]
    check(not missing, path, f"no {missing}")
    return obj


def lists_digest(records: list[dict]) -> str:
    """What a shard's scores are of: the questions and their candidates, in order.

    Args:
        records: the lists' records (``question``, ``gold``, ``negatives``).
    """
    return digest([[r["question"], r["gold"][0], [c for c, _ in r["negatives"]]]
                   for r in records])


def check_settings(folder: Path, key: dict, *, create: bool) -> None:
    """Refuse ``folder`` when its ``settings.json`` records another key; with ``create``,
    write the key into a folder that has none (a damaged one is written again: what the
    folder holds is bound to the key's digest, so nothing of another key is read).

    Args:
        folder: the teacher-score folder (``data.teacher.output``).
        key: the settings' key (:func:`cache_key`).
        create: write the key when the folder has none; False: such a folder is refused.
    """
    path = folder / SETTINGS
    fix = (f"give another data.teacher.output, or add --rebuild to {COMMAND} to score "
           "again in this folder")
    try:
        recorded = read_json(path)
    except Damaged as damage:
        if not create:
            raise InputFileError("data.teacher.output", folder, f"no teacher scores "
                                 f"({damage.problem})", f"run {COMMAND} first") from None
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(key, indent=2, sort_keys=True), encoding="utf-8")
        return
    from ..training.run_folder import describe, flat_differences

    diffs = flat_differences(recorded, key)
    if diffs:
        raise SettingsMismatchError(folder, diffs, f"data.teacher.output={folder} holds "
                                    f"teacher scores of other settings ({describe(diffs)}) "
                                    f"(fix: {fix})")


def read_scores(folder: str | Path, key: dict) -> tuple[list[dict], list[list[float]], dict]:
    """(lists, teacher scores per list, summary) of a finished folder of ``key``; an
    unfinished, damaged or other folder is refused, naming the command that finishes it.

    Args:
        folder: the teacher-score folder (``data.teacher.output``).
        key: the settings' key (:func:`cache_key`).
    """
    folder = Path(folder)
    check_settings(folder, key, create=False)
    fix = f"run {COMMAND} with these settings: it finishes the folder (and rebuilds what is damaged)"
    if not (folder / SUMMARY).is_file():
        raise InputFileError("data.teacher.output", folder, "unfinished (no teacher.json)", fix)
    try:
        summary = read_json(folder / SUMMARY, ("shards",))
        records = read_json_gz(folder / LISTS, key, ("records",))["records"]
        scores = []
        for name, lo, hi in shard_ranges(len(records), key["shard_questions"]):
            scores += read_shard(folder / SHARDS / name, key, lo, records[lo:hi])["scores"]
    except Damaged as damage:
        raise InputFileError("data.teacher.output", damage.path, f"damaged: {damage.problem}",
                             fix) from None
    return records, scores, summary


def shard_ranges(n: int, size: int) -> list[tuple[str, int, int]]:
    """(file name, first question, end) of each shard of ``n`` questions.

    Args:
        n: the questions.
        size: the questions of a shard (``shard_questions``).

    Example:

        >>> shard_ranges(5, 2)
        [('00000.json.gz', 0, 2), ('00001.json.gz', 2, 4), ('00002.json.gz', 4, 5)]
    """
    return [(f"{lo // size:05d}.json.gz", lo, min(lo + size, n)) for lo in range(0, n, size)]


def read_shard(path: Path, key: dict, first: int, records: list[dict]) -> dict:
    """One shard (``scores``: one list per question, ``seconds``), checked against the lists
    it must hold; :class:`Damaged`.

    Args:
        path: the shard's file.
        key: the settings' key (:func:`cache_key`).
        first: the index of the shard's first question.
        records: the lists the shard must score (one score per gold and negative).
    """
    import math

    shard = read_json_gz(path, key, ("first", "lists", "scores", "seconds"))
    check(shard["first"] == first and shard["lists"] == lists_digest(records), path,
          "the scores of other lists")
    scores = shard["scores"]
    check(isinstance(scores, list) and len(scores) == len(records), path,
          f"{len(scores) if isinstance(scores, list) else 'no'} score lists for "
          f"{len(records)} questions")
    for r, s in zip(records, scores, strict=True):
        check(isinstance(s, list) and len(s) == 1 + len(r["negatives"])
              and all(isinstance(v, int | float) and math.isfinite(v) for v in s), path,
              f"the scores of {r['question']!r} are not {1 + len(r['negatives'])} numbers")
    return shard
