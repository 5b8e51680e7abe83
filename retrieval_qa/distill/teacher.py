"""The teacher's scores of every distillation list, computed once into a resumable folder
(:mod:`.cache`): ``rqa prepare experiment=distill profile=cpu``.

Steps, each skipped when the folder already holds it (under the same key):

1. the lists (:mod:`.questions`, :mod:`.lists`): the distillation pool, the pipeline's first
   stage on it (each retriever's run file is itself reused), each question's list;
2. the teacher's scores, ``shard_questions`` questions at a time, each shard written
   atomically when it is finished: a crash loses at most the shard being scored, and the
   next call goes on from the first missing one; a damaged shard (or lists file) is
   rebuilt, with a warning;
3. ``teacher.json``, the summary (counts, the first stage's metrics, times), written last:
   the data module reads a folder only once it is there.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import torch

from ..written import Damaged, rebuilding, write_text
from .cache import (
    FIRST_STAGE,
    FORMAT,
    LISTS,
    SETTINGS,
    SHARDS,
    SUMMARY,
    cache_key,
    check_settings,
    digest,
    lists_digest,
    read_json_gz,
    read_shard,
    shard_ranges,
    teacher_folder,
    write_json_gz,
)

log = logging.getLogger(__name__)


def build_lists(teacher: dict, data: dict, evaluation: dict, folder: Path, key: dict,
                progress: bool) -> dict:
    """Step 1 (see the module docstring): the lists file's content, written.

    Args:
        teacher: the ``data.teacher`` block (``pipeline``, ``questions``, ``seed``,
            ``list_size``).
        data: the data block (the training file and its split, ``data_dir``).
        evaluation: the ``eval`` block (the first stage's ranking).
        folder: the teacher-score folder.
        key: the folder's key (:func:`~.cache.cache_key`).
        progress: show progress.
    """
    from ..data import load_pool
    from ..pipeline.composition import load_pipeline
    from ..progress import stage
    from .lists import first_stage, question_lists
    from .questions import distill_pool, reranker_questions

    start = time.perf_counter()
    with stage(f"distillation questions of {data['train_dataset']}/{data['train_pool']}",
               progress) as s:
        full, _ = load_pool(data["train_dataset"], data["train_pool"], data["data_dir"])
        excluded = reranker_questions(full, key["teacher_training_questions"])
        pool, counts = distill_pool(full, data["val_fraction"], data["split_seed"], excluded,
                                    teacher["questions"], teacher["seed"])
        s.detail = (f"{counts['questions']} questions ({counts['teacher_questions_left_out']} "
                    f"the teacher trained on left out), {counts['candidates']} sentences")
    fused, info = first_stage(load_pipeline(teacher["pipeline"]), pool, folder / FIRST_STAGE,
                              data_dir=data["data_dir"], evaluation=evaluation,
                              progress=progress)
    records, list_counts = question_lists(pool, fused, teacher["list_size"], teacher["seed"])
    lists = {"format": FORMAT, "key": digest(key), "records": records,
             "counts": {**counts, **list_counts}, "first_stage": info,
             "seconds": round(time.perf_counter() - start, 1)}
    write_json_gz(folder / LISTS, lists)
    return lists


def score_lists(model, records: list[dict], batch_size: int, bar) -> list[list[float]]:
    """The teacher's score of each list's entries (gold first), ``batch_size`` pairs a
    forward pass, the pairs taken by length (less padding: a third less time on a CPU).

    Args:
        model: the teacher (``score_pairs(questions, sentences, batch_size)``).
        records: the lists (``question``, ``gold``, ``negatives``).
        batch_size: pairs per forward pass.
        bar: a progress bar (``update(n)`` after every batch).
    """
    from ..classifiers.pair_classifier import length_order

    questions = [r["question"] for r in records for _ in range(1 + len(r["negatives"]))]
    sentences = [t for r in records for t in [r["gold"][1], *(s for _, s in r["negatives"])]]
    order = length_order(questions, sentences)
    flat = [0.0] * len(questions)
    for lo in range(0, len(order), batch_size):
        rows = order[lo:lo + batch_size]
        part = model.score_pairs([questions[i] for i in rows], [sentences[i] for i in rows],
                                 batch_size)
        for i, value in zip(rows, part.float().cpu().tolist(), strict=True):
            flat[i] = value
        bar.update(len(rows))
    out, at = [], 0
    for r in records:
        n = 1 + len(r["negatives"])
        out.append(flat[at:at + n])
        at += n
    return out


def _device(name: str) -> str:
    return ("cuda" if torch.cuda.is_available() else "cpu") if name == "auto" else name


def clear(folder: Path) -> None:
    """Remove what this module writes into ``folder`` (and nothing else).

    Args:
        folder: the teacher-score folder.
    """
    import shutil

    for name in (SUMMARY, LISTS, SETTINGS):
        (folder / name).unlink(missing_ok=True)
    for name in (SHARDS, FIRST_STAGE):
        shutil.rmtree(folder / name, ignore_errors=True)


def score_teacher(teacher: dict, data: dict, evaluation: dict, *, rebuild: bool = False,
                  progress: bool = True, reranker=None) -> dict:
    """Fill ``teacher["output"]`` (see the module docstring) and return its summary.
    ``teacher``: the ``data.teacher`` block; ``data``: the data block; ``evaluation``: the
    ``eval`` block (the first stage's ranking); ``rebuild``: start the folder over;
    ``reranker``: the teacher model, already loaded (default: loaded from its folder).

    Args:
        teacher: the ``data.teacher`` block of conf/data/distill.yaml (``pipeline``,
            ``reranker``, ``questions``, ``seed``, ``list_size``, ``shard_questions``,
            ``batch_size``, ``device``, ``output``).
        data: the composed ``data`` block (the training file and its split).
        evaluation: the ``eval`` block.
        rebuild: remove what an earlier call wrote into the folder first.
        progress: show progress bars.
        reranker: the teacher, an object with the reranker's pair scoring; None: the
            cross-encoder export of the teacher's folder, loaded when a shard needs it.

    Returns:
        The summary written to the folder's ``teacher.json`` (counts, first-stage metrics,
        times).

    Example:

        >>> from retrieval_qa.registry import config_values
        >>> from retrieval_qa.config import compose
        >>> cfg = compose(["experiment=distill", "profile=cpu"])  # doctest: +SKIP
        >>> summary = score_teacher(config_values(cfg.data.teacher),  # doctest: +SKIP
        ...                         config_values(cfg.data), config_values(cfg.eval))
    """
    from tqdm.auto import tqdm

    key = cache_key(teacher, data)
    folder = Path(teacher["output"])
    if rebuild:
        clear(folder)
    check_settings(folder, key, create=True)
    try:
        lists = read_json_gz(folder / LISTS, key, ("records", "counts", "first_stage",
                                                   "seconds"))
    except Damaged as damage:
        if (folder / LISTS).exists():
            rebuilding(damage, log)
        lists = build_lists(teacher, data, evaluation, folder, key, progress)
    records = lists["records"]
    ranges = shard_ranges(len(records), key["shard_questions"])
    done: dict[str, dict] = {}
    for name, lo, hi in ranges:
        if (folder / SHARDS / name).exists():
            try:
                done[name] = read_shard(folder / SHARDS / name, key, lo, records[lo:hi])
            except Damaged as damage:
                rebuilding(damage, log)
    pairs = [1 + len(r["negatives"]) for r in records]
    device = _device(teacher["device"])
    with tqdm(total=sum(pairs), initial=sum(sum(pairs[lo:hi]) for name, lo, hi in ranges
                                            if name in done),
              desc="teacher scores", unit="pair", disable=not progress) as bar:
        for name, lo, hi in ranges:
            if name in done:
                continue
            if reranker is None:
                from ..classifiers.reranker import CrossEncoderReranker

                reranker = CrossEncoderReranker.load(teacher_folder(teacher), device)
                if reranker.reads != "sentence":  # the lists hold sentences, no paragraphs
                    raise ValueError(
                        f"the teacher {teacher_folder(teacher)} reads {reranker.reads}; the "
                        "distillation lists hold sentences alone (fix: a teacher trained with "
                        "model.reads=sentence, the default)")
            start = time.perf_counter()
            scores = score_lists(reranker, records[lo:hi], int(teacher["batch_size"]), bar)
            done[name] = {"format": FORMAT, "key": digest(key), "first": lo,
                          "lists": lists_digest(records[lo:hi]), "scores": scores,
                          "seconds": round(time.perf_counter() - start, 3),
                          "device": device, "threads": torch.get_num_threads()}
            write_json_gz(folder / SHARDS / name, done[name])
    scoring = sum(s["seconds"] for s in done.values())
    summary = {"output": str(folder), "key": digest(key), "teacher": str(teacher_folder(teacher)),
               "questions": len(records), "list_size": key["list_size"], "pairs": sum(pairs),
               "shards": len(ranges), "counts": lists["counts"],
               "first_stage": lists["first_stage"],
               "seconds": {"lists": lists["seconds"], "scoring": round(scoring, 1),
                           "per_1000_pairs": round(1000 * scoring / max(sum(pairs), 1), 2)},
               "scored_on": sorted({f"{s.get('device')}, {s.get('threads')} threads"
                                    for s in done.values()})}
    write_text(folder / SUMMARY, json.dumps(summary, indent=2))
    return summary
