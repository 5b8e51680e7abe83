"""Does the validation side flatter a reranker on the paragraphs it trained on?

The training file's 9:1 split (:mod:`retrieval_qa.data.split`) keeps every question and every
answer sentence on one side, but a paragraph may hold questions of both sides; the dev and
test pools share no paragraph with the training file. A reranker that learnt a paragraph from
its training questions could then score better on the validation questions of that paragraph
than on a test pool, and earn a head weight that a test pool does not repay.

This screen splits the validation questions of a pipeline into those whose gold sentence's
paragraph holds one of the reranker's training questions (*seen*: the questions its
``training.json`` settings draw, the same split and the same sample) and the others
(*unseen*), and reports, for every head weight of the grid ``0, 0.1, ..., 1``, the validation
MRR of each group and the reranker's gain over the fused order (weight 0) in each, with the
difference of the two gains and its 95 % interval (a normal interval over the questions of
the two groups), and the weight the unseen questions alone would choose. Only the gold
sentences' paragraphs count as seen, not those of the negatives. No test pool is read.

    python experiments/rerank_seen_paragraphs.py --pipeline hybrid_ft_rerank10 \\
        --from-run-files runs/pipeline/sent-q2000-re \\
        --reranker runs/reranker/listwise-para-q12k runs/pipeline/para-q12k-re \\
        --output results/distill/rerank_seen_paragraphs.json

Each ``--reranker EXPORT PIPELINE_DIR`` reads (or scores and keeps) the export's scores of the
validation heads in ``PIPELINE_DIR``, as ``rqa evaluate --pipeline`` keeps them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from experiments.rerank_ensemble_screen import (  # noqa: E402
    GRID,
    ranks_by_weight,
    validation_heads,
    validation_side,
)


def training_paragraphs(full, draw: dict) -> set[str]:
    """The paragraphs (texts) of the gold sentences of the questions a reranker trained on:
    its ``draw`` (:func:`retrieval_qa.distill.questions.reranker_draw`) made again over
    ``full``, the pool of its training file."""
    from retrieval_qa.distill.questions import reranker_pool

    pool = reranker_pool(full, draw)
    return {pool.candidates[c].context for gold in pool.gold for c in gold}


def seen_mask(pool, paragraphs: set[str]) -> np.ndarray:
    """Per question of ``pool``: whether a gold sentence's paragraph is one of
    ``paragraphs``."""
    return np.array([any(pool.candidates[c].context in paragraphs for c in gold)
                     for gold in pool.gold], dtype=bool)


def split_gains(rr_by_weight: dict[float, np.ndarray], seen: np.ndarray) -> dict:
    """The MRR of all, seen and unseen questions at each weight (``rr_by_weight``: the
    questions' reciprocal ranks in %, weight 0 the fused order), and each group's gain over
    weight 0 with the seen group's excess gain and its 95 % interval."""
    if seen.all() or not seen.any():
        raise ValueError(f"{int(seen.sum())} of {len(seen)} questions seen: the split needs "
                         "both groups")
    base = rr_by_weight[0.0]
    out = {}
    for w, rr in rr_by_weight.items():
        gain = rr - base
        gs, gu = gain[seen], gain[~seen]
        excess = float(gs.mean() - gu.mean())
        se = float(np.sqrt(gs.var(ddof=1) / len(gs) + gu.var(ddof=1) / len(gu)))
        out[w] = {"mrr": round(float(rr.mean()), 2), "mrr_seen": round(float(rr[seen].mean()), 2),
                  "mrr_unseen": round(float(rr[~seen].mean()), 2),
                  "gain_seen": round(float(gs.mean()), 2),
                  "gain_unseen": round(float(gu.mean()), 2),
                  "excess_gain_seen": round(excess, 2),
                  "excess_gain_seen_ci95": [round(excess - 1.96 * se, 2),
                                            round(excess + 1.96 * se, 2)]}
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pipeline", required=True, help="its fusion and validation side")
    p.add_argument("--from-run-files", required=True,
                   help="the folder of its validation run files (an earlier rqa evaluate "
                        "--pipeline run's --pipeline-dir)")
    p.add_argument("--reranker", nargs=2, action="append", required=True,
                   metavar=("EXPORT", "PIPELINE_DIR"),
                   help="a cross-encoder export and the pipeline folder of its kept scores")
    p.add_argument("--depth", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--output", required=True)
    args = p.parse_args(argv)
    from retrieval_qa.config import load_yaml
    from retrieval_qa.data import load_pool
    from retrieval_qa.distill.questions import reranker_draw
    from retrieval_qa.portable_paths import portable
    from retrieval_qa.runtime import apply_threads

    apply_threads(None)
    start = time.perf_counter()
    evaluation = load_yaml("eval/default.yaml")
    cfg, _, val, val_fused = validation_side(args.pipeline, args.from_run_files, evaluation)
    rows, files = [], {}
    for export, folder in args.reranker:
        draw = reranker_draw(export)
        key = (draw["dataset"], draw["pool"])
        if key not in files:  # one load of each training file
            files[key] = load_pool(*key)[0]
        seen = seen_mask(val, training_paragraphs(files[key], draw))
        heads = validation_heads(val, val_fused, export, folder, args.depth, args.batch_size)
        ranks = ranks_by_weight(val, val_fused, heads, float(evaluation["memory_mb"]))
        by_weight = split_gains({w: 100.0 / r for w, r in ranks.items()}, seen)
        best, best_unseen = (max(GRID, key=lambda w: (by_weight[w][key], -w))
                             for key in ("mrr", "mrr_unseen"))
        reads = json.loads((Path(export) / "training.json").read_text(encoding="utf-8"))[
            "settings"].get("model", {}).get("reads", "sentence")
        rows.append({"reranker": portable(export), "training_questions": draw["questions"],
                     "training_seed": draw["seed"], "reads": reads,
                     "seen_questions": int(seen.sum()),
                     "best_weight": best, "best_weight_unseen_only": best_unseen,
                     "at_best_weight": by_weight[best], "by_weight": by_weight})
        b = by_weight[best]
        print(f"{Path(export).name}: {int(seen.sum())} of {len(seen)} seen; weight {best}: "
              f"gain seen {b['gain_seen']:+.2f}, unseen {b['gain_unseen']:+.2f}, excess "
              f"{b['excess_gain_seen']:+.2f} {b['excess_gain_seen_ci95']}", flush=True)
    result = {"pipeline": cfg.name, "from_run_files": portable(args.from_run_files),
              "depth": args.depth, "val_pool": f"{val.dataset}/{val.pool}",
              "val_questions": len(val.questions), "rows": rows,
              "seconds": round(time.perf_counter() - start, 1)}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
