"""Each distillation question's list: its gold sentence and the best negatives of the hybrid
first stage that the pipeline runs at test time.

The first stage is a pipeline config's (``conf/pipeline/*.yaml``): every retriever ranks the
distillation pool (:mod:`.questions`) and keeps its ``top_k``, and the lists are fused as the
pipeline fuses them, with its fusion settings tuned on the validation side of the training
file when the config says ``tune`` (:func:`~retrieval_qa.pipeline.run.tune_fusion`). A
retriever whose tuned convex weight is 0 is not run on the pool: it only adds candidates at
the lowest fused score, below every candidate the others retrieved, so the head of each fused
list (where the lists are cut) is the pipeline's. Each retriever's lists are a run file under
the cache folder (the pipeline's layout, with the settings they were computed with beside
them), read back instead of computed again when their settings match.

A list (:func:`question_lists`): the question's gold sentence (one of its gold sentences,
drawn with the seed when it has several), then the first ``size - 1`` sentences of the
fused order that are not an answer of the question (the mining rule of
:func:`~retrieval_qa.mining.neighbours.known_positives`: no gold sentence, no copy of one,
no answer of the same question string) and whose text is not already in the list. A fused
list with fewer such sentences gives a shorter list (counted).
"""

from __future__ import annotations

import dataclasses
import logging
import random
from pathlib import Path

import numpy as np

from ..data.pool_index import known_positives
from ..data.types import RetrievalPool
from ..errors import DataFormatError, InputFileError
from ..pipeline.composition import Pipeline
from ..pipeline.fused_ranks import ordered
from ..pipeline.run import fuse, pool_folder, tune_fusion
from ..pipeline.stages import (
    RUN_SUFFIX,
    StageRun,
    run_retriever,
    settings_file,
)
from ..written import Damaged, read_json

log = logging.getLogger(__name__)


def _recorded(run_file: Path) -> dict | None:
    try:
        return read_json(settings_file(run_file))
    except Damaged:
        return None


def stage_run(spec, top_k: int, pool: RetrievalPool, folder: Path, *,
              evaluation: dict, progress: bool) -> StageRun:
    """One retriever's lists on ``pool``: read from its run file under ``folder`` when that
    was written under the same settings, else computed (and written there).

    Args:
        spec: the retriever's stage of the pipeline config.
        top_k: the candidates it keeps per question.
        pool: the distillation pool.
        folder: the cache folder (the pipeline's layout).
        evaluation: the ``eval`` group's settings (``ks``, ``doc_level``, ``memory_mb``).
        progress: show progress.
    """
    run_file = folder / pool_folder(pool) / f"{spec.name}{RUN_SUFFIX}"
    if run_file.is_file() and _recorded(run_file) == spec.run_settings(top_k):
        try:
            return StageRun.from_file(spec.name, pool, run_file, tuple(evaluation["ks"]))
        except (InputFileError, DataFormatError) as e:
            log.warning("damaged run file %s (%s): running the stage again", run_file, e)
    return run_retriever(spec, pool, top_k, run_file=run_file, progress=progress,
                         ks=tuple(evaluation["ks"]), doc_level=bool(evaluation["doc_level"]),
                         memory_mb=float(evaluation["memory_mb"]))


def first_stage(cfg: Pipeline, pool: RetrievalPool, folder: str | Path, *, data_dir,
                evaluation: dict, progress: bool) -> tuple[list[tuple], dict]:
    """The pipeline's fused first-stage lists (candidate indices, fused scores) of every
    question of ``pool``, and what was done: the fusion settings (as tuned), each stage's
    metrics on the pool (the full ranking's), the stages left out (weight 0).

    Args:
        cfg: the pipeline config (its reranker is ignored).
        pool: the distillation pool.
        folder: the cache folder (the pipeline's layout).
        data_dir: the data folder (the training file, for tuning the fusion); None: the
            default lookup.
        evaluation: the ``eval`` group's settings.
        progress: show progress.
    """
    folder = Path(folder)
    cfg = dataclasses.replace(cfg, reranker=None)  # the first stage only: no head to tune
    fusion, _, _ = tune_fusion(cfg, folder, None, data_dir, progress, evaluation)
    weights = fusion.get("weights")
    convex = cfg.fusion.method == "convex"
    used = [s for s in cfg.retrievers if not convex or weights[s.name] > 0]
    runs = [stage_run(spec, cfg.top_k, pool, folder, evaluation=evaluation, progress=progress)
            for spec in used]
    fused = fuse(cfg, runs, weights, fusion.get("rrf_k"))
    info = {"pipeline": cfg.name, "fusion": {"method": cfg.fusion.method, **fusion},
            "stages": {r.name: {k: round(v, 4) for k, v in r.metrics.items()} for r in runs},
            "left_out": [s.name for s in cfg.retrievers if s not in used]}
    return fused, info


def question_lists(pool: RetrievalPool, fused: list[tuple], size: int, seed: int
                   ) -> tuple[list[dict], dict]:
    """Per question of ``pool``: ``{"question", "gold": [candidate id, text], "negatives":
    [[id, text], ...], "gold_rank"}`` (see the module docstring; ``gold_rank``: the rank of
    its best answer in the fused list, null when the first stage did not retrieve one), and
    counts.

    Args:
        pool: the distillation pool.
        fused: each question's fused first-stage list (candidate indices, fused scores).
        size: the list size (>= 1): the gold sentence and up to ``size - 1`` negatives.
        seed: the draw of the gold sentence of a question that has several.
    """
    if size < 1:
        raise ValueError(f"list_size must be >= 1 (the gold sentence), got {size}")
    rng = random.Random(seed)
    positives = known_positives(pool)
    cands = pool.candidates
    records, short, in_list = [], 0, 0
    for q, (ids, scores) in enumerate(fused):
        ids = np.asarray(ids, dtype=np.int64)
        order = ids[ordered(ids, np.asarray(scores, dtype=np.float64))].tolist()
        gold = pool.gold[q][rng.randrange(len(pool.gold[q]))]
        taken = {cands[c].text for c in positives[q]}
        negatives, gold_rank = [], None
        for rank, c in enumerate(order, 1):
            if c in positives[q]:
                gold_rank = gold_rank or rank
            elif len(negatives) < size - 1 and cands[c].text not in taken:
                taken.add(cands[c].text)
                negatives.append([cands[c].id, cands[c].text])
            if gold_rank and len(negatives) == size - 1:
                break
        short += len(negatives) < size - 1
        in_list += gold_rank is not None and gold_rank <= size
        records.append({"question": pool.questions[q],
                        "gold": [cands[gold].id, cands[gold].text],
                        "negatives": negatives, "gold_rank": gold_rank})
    return records, {"questions": len(records), "list_size": size,
                     "negatives": sum(len(r["negatives"]) for r in records),
                     "short_lists": short, "gold_in_first_stage_top_list_size": in_list}
