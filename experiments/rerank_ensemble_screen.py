"""A validation-side screen of rerankers and their ensembles for one pipeline: each reranker's
scores of the pipeline's validation heads (the fused top ``--depth`` of the training file's
validation side, fusion tuned there as the pipeline tunes it; scores kept and read back in the
pipeline folder, :mod:`retrieval_qa.pipeline.reranker_scores`), then the validation MRR of each
reranker alone and of every ensemble of two or more: the mean of its members' scores, raw or
each min-max normalised over the head, placed as the pipeline places one reranker's (its head
weight chosen on the grid ``0, 0.1, ..., 1``). No test pool is read.

    python experiments/rerank_ensemble_screen.py --pipeline hybrid_distill_rerank10 \\
        --pipeline-dir runs/pipeline/distill-rr10 \\
        --rerankers runs/reranker/listwise runs/reranker/listwise-fs \\
                    runs/reranker/listwise-seed1 runs/reranker/listwise-seed2 \\
        --output results/distill/rerank_ensemble_screen_seed42.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import numpy as np


def combined(members: list[list[np.ndarray]], how: str) -> list[np.ndarray]:
    """Per question, the mean of the members' head scores (``how``: ``raw``, or ``minmax``:
    each member's normalised over the head first)."""
    from retrieval_qa.pipeline.fusion import normalise

    return [np.mean([normalise(m[q], "minmax") if how == "minmax" else m[q] for m in members],
                    axis=0) for q in range(len(members[0]))]


#: the head weights a screen tries
GRID = [round(w, 1) for w in np.arange(0, 1.05, 0.1)]


def ranks_by_weight(val, val_fused: list[tuple], heads: list[tuple], memory_mb: float
                    ) -> dict[float, np.ndarray]:
    """The validation questions' gold ranks with the ``heads`` (positions, scores) placed as
    the pipeline places a reranker's (:func:`retrieval_qa.pipeline.reranking.place`), at each
    head weight of :data:`GRID`."""
    from retrieval_qa.pipeline.fused_ranks import rank_lists
    from retrieval_qa.pipeline.reranking import place

    return {w: np.asarray(rank_lists(val, place(val_fused, heads, w), doc_level=False,
                                     memory_mb=memory_mb)[0], dtype=np.float64) for w in GRID}


def validation_side(pipeline: str, run_dir: str | Path, evaluation) -> tuple:
    """(config, fusion settings, validation pool, fused validation lists) of ``pipeline``,
    its first stages read from the validation run files in ``run_dir``, fusion tuned there as
    the pipeline tunes it."""
    from retrieval_qa.pipeline.composition import load_pipeline
    from retrieval_qa.pipeline.run import tune_fusion

    cfg = load_pipeline(pipeline)
    fusion, val, val_fused = tune_fusion(cfg, Path(run_dir), Path(run_dir), None, True,
                                         evaluation)
    if val is None:
        raise SystemExit(f"{pipeline} tunes nothing on a validation side (fix: name a "
                         "pipeline whose fusion or reranker says tune)")
    return cfg, fusion, val, val_fused


def validation_heads(val, val_fused: list[tuple], export: str, folder: str | Path,
                     depth: int, batch_size: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The cross-encoder ``export``'s scores of each validation question's fused top
    ``depth`` (:func:`retrieval_qa.pipeline.reranking.head_scores`), read back from the
    pipeline folder ``folder`` where an earlier run kept them, else scored and kept there."""
    from retrieval_qa.mining.classifier_data import artifact_digest
    from retrieval_qa.pipeline.reranker_scores import RerankerScores
    from retrieval_qa.pipeline.rerankers import CrossEncoderStage
    from retrieval_qa.pipeline.reranking import head_scores
    from retrieval_qa.pipeline.run import pool_folder

    stage = CrossEncoderStage(checkpoint=export, top_k=depth, batch_size=batch_size,
                              weight=1.0, depths=[], gate=None, gate_quantiles=[])
    return head_scores(val, val_fused, stage.pair_scorer(), depth, True,
                       RerankerScores(Path(folder) / pool_folder(val), artifact_digest(export)))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pipeline", required=True, help="its fusion and validation side")
    p.add_argument("--pipeline-dir", required=True,
                   help="the folder of its validation run files (an earlier rqa evaluate "
                        "--pipeline run's --pipeline-dir); the scores are kept there too")
    p.add_argument("--rerankers", nargs="+", required=True, help="cross-encoder exports")
    p.add_argument("--depth", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--output", required=True)
    args = p.parse_args(argv)
    from retrieval_qa.config import load_yaml
    from retrieval_qa.evaluation.metrics import metrics_from_ranks
    from retrieval_qa.portable_paths import portable
    from retrieval_qa.runtime import apply_threads

    apply_threads(None)
    start = time.perf_counter()
    evaluation = load_yaml("eval/default.yaml")
    cfg, fusion, val, val_fused = validation_side(args.pipeline, args.pipeline_dir, evaluation)
    scores, heads = {}, None
    for folder in args.rerankers:
        found = validation_heads(val, val_fused, folder, args.pipeline_dir, args.depth,
                                 args.batch_size)
        heads = [h for h, _ in found]
        scores[folder] = [v for _, v in found]

    def val_mrr(values: list[np.ndarray]) -> dict[float, float]:
        ranks = ranks_by_weight(val, val_fused, list(zip(heads, values, strict=True)),
                                float(evaluation["memory_mb"]))
        return {w: round(float(metrics_from_ranks(r, (1,))["mrr"]), 4) for w, r in ranks.items()}

    rows = []
    for size in range(1, len(args.rerankers) + 1):
        for members in itertools.combinations(args.rerankers, size):
            for how in ("raw", "minmax") if size > 1 else ("alone",):
                by_weight = val_mrr(combined([scores[m] for m in members], how)
                                    if size > 1 else scores[members[0]])
                best = max(GRID, key=lambda w: (by_weight[w], -w))
                rows.append({"rerankers": [portable(m) for m in members], "combination": how,
                             "weight": best, "val_mrr": by_weight[best],
                             "val_mrr_by_weight": by_weight})
                print(f"{how:6} {[Path(m).name for m in members]}: weight {best}, val MRR "
                      f"{by_weight[best]:.2f}", flush=True)
    result = {"pipeline": cfg.name, "pipeline_dir": portable(args.pipeline_dir), "depth": args.depth,
              "val_pool": f"{val.dataset}/{val.pool}", "val_questions": len(val.questions),
              "fusion_weights": fusion["weights"], "fused_val_mrr": fusion.get("val_mrr"),
              "rows": rows, "seconds": round(time.perf_counter() - start, 1)}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
