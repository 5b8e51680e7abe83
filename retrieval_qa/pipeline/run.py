"""Running a pipeline: first-stage run files, fusion (tuned on the validation side of the
training file when the config says ``tune``), the optional reranker, each stage ranked by the
one evaluator's rules (:mod:`.fused_ranks`). ``rqa evaluate --pipeline NAME`` calls
:func:`run_pipeline`; ``--from-run-files DIR`` re-runs fusion and reranking from the run files
a previous run wrote to DIR, without re-encoding.

Run-file layout under the run folder: ``<dataset>-<pool>/<retriever>.run.jsonl`` per
first-stage retriever (the same for the validation lists, whose pool is named
``<train pool>-val[-<N>q]``), and ``<dataset>-<pool>/fused.run.jsonl`` /
``reranked.run.jsonl`` for the later stages; the reranker's scores of each pool's heads in
``<dataset>-<pool>/reranker_scores/`` (:mod:`.reranker_scores`: a reranking stopped by a
crash goes on from there)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from ..data.types import RetrievalPool
from ..evaluation.evaluator import _records as evaluator_records
from ..evaluation.metrics import metrics_from_ranks
from ..evaluation.per_question import beside_run_file, write_per_question
from ..evaluation.runfile import RunFileWriter
from .composition import Pipeline
from .fused_ranks import ordered, rank_lists
from .fusion import convex, rrf
from .reranker_scores import RerankerScores
from .reranking import rerank, tune_rerank
from .stages import RUN_SUFFIX, StageRun, check_stage_file, run_retriever
from .tuning import tune


def pool_folder(pool: RetrievalPool) -> str:
    """The folder of a pool's run files: ``<dataset>-<pool>``.

    Args:
        pool: the pool.
    """
    return f"{pool.dataset}-{pool.pool}"


def first_stage(cfg: Pipeline, pool: RetrievalPool, run_dir: Path,
                from_run_files: Path | None, progress: bool, evaluation: dict) -> list[StageRun]:
    """The first-stage retrievers' lists on ``pool``: run (their run files written under
    ``run_dir``), or read back from ``from_run_files``.

    Args:
        cfg: the pipeline.
        pool: the pool.
        run_dir: where the run files go.
        from_run_files: the run folder of an earlier run to read the lists from; None: run the
            retrievers.
        progress: show progress bars.
        evaluation: the ``eval`` settings (``ks``, ``doc_level``, ``memory_mb``).
    """
    ks = tuple(evaluation["ks"])
    runs = []
    for stage in cfg.retrievers:
        name = f"{stage.name}{RUN_SUFFIX}"
        if from_run_files is not None:
            path = from_run_files / pool_folder(pool) / name
            note = check_stage_file(path, stage.run_settings(cfg.top_k))
            if note:
                print(f"rqa evaluate --pipeline: {note}", file=sys.stderr, flush=True)
            runs.append(StageRun.from_file(stage.name, pool, path, ks))
        else:
            runs.append(run_retriever(stage, pool, cfg.top_k, progress=progress, ks=ks,
                                      doc_level=bool(evaluation["doc_level"]),
                                      memory_mb=float(evaluation["memory_mb"]),
                                      run_file=run_dir / pool_folder(pool) / name))
    return runs


def fuse(cfg: Pipeline, runs: list[StageRun], weights=None, rrf_k=None) -> list[tuple]:
    """Per question: (candidate indices, fused scores) of the stage runs.

    Args:
        cfg: the pipeline (its ``fusion``).
        runs: the first-stage runs, one per retriever.
        weights: ``{retriever: weight}`` (``convex``).
        rrf_k: the RRF constant (``rrf``).
    """
    if cfg.fusion.method == "none":
        return runs[0].lists()
    per_question = list(zip(*(r.lists() for r in runs), strict=True))
    if cfg.fusion.method == "rrf":
        return [rrf(lists, rrf_k) for lists in per_question]
    w = [weights[r.name] for r in runs]
    return [convex(lists, w, cfg.fusion.normalization) for lists in per_question]


def tune_fusion(cfg: Pipeline, run_dir: Path, from_run_files: Path | None,
                data_dir, progress: bool, evaluation) -> tuple[dict, RetrievalPool | None,
                                                               list[tuple] | None]:
    """Settings of the fusion: as configured, or tuned on the validation side of
    ``tuning.dataset``/``tuning.pool`` (the data module's 9:1 split). Also returns that
    validation pool and its fused lists (None when nothing is tuned), for the reranker's
    weight.

    Args:
        cfg: the pipeline.
        run_dir: where the validation lists' run files go.
        from_run_files: the run folder of an earlier run to read them from; None: run the
            retrievers.
        data_dir: the data folder; None: the default.
        progress: show progress bars.
        evaluation: the ``eval`` settings (``ks``, ``doc_level``, ``memory_mb``).
    """
    fusion = cfg.fusion
    if not cfg.needs_tuning:
        return {"weights": fusion.weights, "rrf_k": fusion.rrf_k}, None, None
    from ..data import load_pool
    from ..data.caps import cap_questions
    from ..data.split import train_val_split

    t = cfg.tuning
    start = time.perf_counter()
    train_pool, _ = load_pool(t.dataset, t.pool, data_dir)
    _, val = train_val_split(train_pool, t.val_fraction, t.split_seed)
    # the data module's capped validation pool: the questions' paragraphs only
    val = cap_questions(val, t.max_questions, t.split_seed)
    runs = first_stage(cfg, val, run_dir, from_run_files, progress, evaluation)
    per_question = list(zip(*(r.lists() for r in runs), strict=True))
    kind = fusion.method
    found = {}
    if "tune" in (fusion.weights, fusion.rrf_k) and kind != "none":
        found = tune(per_question, val.gold, len(val.candidates), kind,
                     names=[r.name for r in runs], grid_step=t.grid_step,
                     rrf_k_grid=t.rrf_k_grid, normalization=fusion.normalization)
    weights = found.get("weights", fusion.weights)
    rrf_k = found.get("rrf_k", fusion.rrf_k)
    found.update({"weights": weights, "rrf_k": rrf_k,
                  "val_pool": f"{val.dataset}/{val.pool}",
                  "val_questions": len(val.questions), "val_candidates": len(val.candidates),
                  "val_stages": {r.name: _round(r.metrics) for r in runs},
                  "seconds": round(time.perf_counter() - start, 3)})
    return found, val, fuse(cfg, runs, weights, rrf_k)


def _round(metrics: dict) -> dict:
    return {k: round(v, 4) for k, v in metrics.items()}


def evaluate_lists(name: str, pool: RetrievalPool, lists: list[tuple], run_file: Path | None,
                   *, doc_level: bool, memory_mb: float, ks, seconds: float) -> dict:
    """Rank per-question lists (ids, scores[, tiers]) under the pipeline's rule, write their
    run file and its per-question records beside it, and return the stage's summary.

    Args:
        name: the stage's name.
        pool: the pool whose candidates the lists index.
        lists: per question ``(ids, scores[, tiers])``.
        run_file: the run file to write; None: none.
        doc_level: also the gold documents' ranks.
        memory_mb: the evaluator's memory budget, in MiB.
        ks: the cut-offs of R@k.
        seconds: the stage's time, for its summary.
    """
    ranks, doc_ranks = rank_lists(pool, lists, doc_level=doc_level, memory_mb=memory_mb)
    metrics = metrics_from_ranks(ranks, ks)
    if doc_ranks is not None:
        metrics.update(metrics_from_ranks(doc_ranks, ks, prefix="doc_"))
    with RunFileWriter(run_file) as out:
        if out:
            out.write(_records(pool, lists, ranks, doc_ranks))
    if run_file is not None:
        write_per_question(beside_run_file(run_file), pool, ranks, doc_ranks, ks)
    return {"stage": name, "metrics": _round(metrics), "seconds": round(seconds, 3),
            "seconds_per_1000_questions": round(1000 * seconds / len(pool.questions), 3),
            "run_file": str(run_file) if run_file else None}


def _records(pool, lists, ranks, doc_ranks):
    """The run-file records of per-question lists (the evaluator's, each list in ranking
    order), plus ``reranked``, the head's size, for lists that carry tiers."""
    top = []
    for entry in lists:
        ids, scores = np.asarray(entry[0]), np.asarray(entry[1], dtype=np.float64)
        order = ordered(ids, scores, entry[2] if len(entry) > 2 else None)
        top.append((ids[order], scores[order]))
    records = evaluator_records(pool, [c.id for c in pool.candidates], range(len(lists)),
                                ranks, doc_ranks, top)
    for rec, entry in zip(records, lists, strict=True):
        if len(entry) > 2:
            rec["reranked"] = int(np.sum(entry[2]))
    return records


def run_pipeline(cfg: Pipeline, pool: RetrievalPool, run_dir: str | Path, *,
                 from_run_files: str | Path | None = None, data_dir=None,
                 evaluation, progress: bool = False,
                 reranker=None) -> dict:
    """Every stage of ``cfg`` on ``pool``; returns each stage's metrics and time, the fusion
    settings (and how they were tuned) and the run files. ``reranker``: the model the
    pipeline's reranker scores with, an object with ``score_pairs`` (default: its own, the
    export it names; :meth:`.rerankers.CrossEncoderStage.pair_scorer`).

    Args:
        cfg: the :class:`~.composition.Pipeline` (:func:`~.composition.load_pipeline`).
        pool: the evaluated :class:`~retrieval_qa.data.RetrievalPool`.
        run_dir: the folder of the stages' run files.
        from_run_files: read the first stages' lists from the run files of this folder
            instead of running them; None: run them.
        data_dir: the data folder of the tuning pool; None: the usual search
            (:func:`~retrieval_qa.data.load_pool`).
        evaluation: the ``eval`` group's settings (``doc_level``, ``ks``, ``memory_mb``, ...).
        progress: show progress bars.
        reranker: the reranker's model, an object with ``score_pairs``; None: the export the
            pipeline names.

    Example:

        >>> from retrieval_qa.data import load_pool
        >>> from retrieval_qa.pipeline.composition import load_pipeline
        >>> pool, _ = load_pool("reqa_squad", "dev")  # doctest: +SKIP
        >>> report = run_pipeline(load_pipeline("bm25_context"), pool,  # doctest: +SKIP
        ...                       "runs/pipeline", evaluation=cfg.eval)
        >>> report["metrics"]["mrr"]  # doctest: +SKIP
    """
    run_dir = Path(run_dir)
    source = Path(from_run_files) if from_run_files is not None else None
    doc_level, ks = bool(evaluation["doc_level"]), tuple(evaluation["ks"])
    memory_mb = float(evaluation["memory_mb"])
    runs = first_stage(cfg, pool, run_dir, source, progress, evaluation)
    stages = [{"stage": r.name, "metrics": _round(r.metrics),
               "seconds": round(r.seconds, 3) if source is None else None,
               "seconds_per_1000_questions": round(1000 * r.seconds / len(pool.questions), 3)
               if source is None else None, "run_file": r.run_file,
               "note": None if source is None else "read from its run file (the full "
                                                   "ranking's metrics on these questions; "
                                                   "time: see the run that wrote it)"}
              for r in runs]
    first_seconds = sum(r.seconds for r in runs)
    fusion, val, val_fused = tune_fusion(cfg, run_dir, source, data_dir, progress, evaluation)
    start = time.perf_counter()
    fused = fuse(cfg, runs, fusion.get("weights"), fusion.get("rrf_k"))
    folder = run_dir / pool_folder(pool)
    if cfg.fusion.method != "none":
        fused_stage = evaluate_lists(f"fused ({cfg.fusion.method})", pool, fused,
                                     folder / f"fused{RUN_SUFFIX}", doc_level=doc_level, ks=ks,
                                     memory_mb=memory_mb,
                                     seconds=time.perf_counter() - start + first_seconds)
        fused_stage["fusion_seconds"] = round(time.perf_counter() - start, 3)
        stages.append(fused_stage)
    else:  # the single retriever's lists under the pipeline's rule beyond top_k
        stages.append(evaluate_lists(f"{runs[0].name} top-{cfg.top_k}", pool, fused,
                                     folder / f"top{cfg.top_k}{RUN_SUFFIX}",
                                     doc_level=doc_level, ks=ks, memory_mb=memory_mb,
                                     seconds=first_seconds))
    if cfg.reranker is not None:
        score_pairs = cfg.reranker.pair_scorer(reranker)
        checkpoint = getattr(cfg.reranker, "checkpoint", None)
        digest = None  # kept scores: of the export the pipeline names, not of a given model
        if reranker is None and checkpoint is not None and Path(checkpoint).is_dir():
            from ..mining.classifier_data import artifact_digest

            digest = artifact_digest(checkpoint)

        def kept(pool_dir: Path) -> RerankerScores | None:
            return RerankerScores(pool_dir, digest) if digest else None

        top_k, weight, gate = cfg.reranker.top_k, cfg.reranker.weight, cfg.reranker.gate
        if "tune" in (top_k, weight, gate):
            start = time.perf_counter()
            tuned = tune_rerank(val, val_fused, score_pairs, cfg.reranker.depths, weight,
                                cfg.tuning.grid_step, memory_mb, gate,
                                cfg.reranker.gate_quantiles, progress,
                                kept(run_dir / pool_folder(val)),
                                getattr(cfg.reranker, "select", "best"),
                                getattr(cfg.reranker, "select_se", 1.0))
            fusion["reranker"] = {**tuned, "seconds": round(time.perf_counter() - start, 3)}
            top_k, weight, gate = tuned["top_k"], tuned["weight"], tuned["gate"]
        start = time.perf_counter()
        scores = kept(folder)
        reranked, conf = rerank(pool, fused, score_pairs, top_k, weight, gate, progress, scores)
        rr_seconds = time.perf_counter() - start
        stage = evaluate_lists(f"reranked top-{top_k}", pool, reranked,
                               folder / f"reranked{RUN_SUFFIX}", doc_level=doc_level, ks=ks,
                               memory_mb=memory_mb,
                               seconds=stages[-1]["seconds"] + rr_seconds)
        stage["rerank_seconds"] = round(rr_seconds, 3)
        if scores is not None:  # the scoring time of a reranking resumed or read back too
            stage["rerank_scores"] = {"folder": str(scores.folder),
                                      "questions_read_back": scores.reused,
                                      "pairs_read_back": scores.pairs_reused,
                                      "scoring_seconds": round(scores.seconds, 3)}
        stage["reranker_weight"], stage["reranker_top_k"] = weight, top_k
        stage["reranker_gate"] = gate
        stage["gated_questions"] = int(np.sum(conf < gate)) if gate else 0
        stage["confidence_mean"] = round(float(np.mean(conf)), 4) if len(conf) else None
        stages.append(stage)
    return {"pipeline": cfg.name, "config": cfg.source, "dataset": pool.dataset,
            "pool": pool.pool, "questions": len(pool.questions),
            "candidates": len(pool.candidates), "top_k": cfg.top_k,
            "from_run_files": str(source) if source else None,
            "fusion": {"method": cfg.fusion.method,
                       "normalization": cfg.fusion.normalization, **fusion},
            "stages": stages, "metrics": stages[-1]["metrics"],
            "settings": cfg.to_dict(),
            "rank_rule": "candidates no stage retrieved tie below every retrieved one, "
                         "sharing the average rank of the remaining positions"}
