"""MRR against the reranking depth k: a pipeline's fused lists (read from its run files) with
the cross-encoder reranker over the fused top-k, for several k, on a seeded subset of the
evaluation pool's questions. Each (question, sentence) pair is scored once for all k.

    python experiments/pipeline_rerank_k.py --pipeline hybrid_convex_rerank \\
        --from-run-files runs/pipeline/dev --max-questions 1000 --ks 5,10,20 \\
        --output results/pipeline/rerank_k_reqa_squad_dev.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


class CachedScores:
    """A reranker whose pair scores are computed once (the deeper k reuses the shallower)."""

    def __init__(self, model) -> None:
        self.model, self.cache, self.seconds, self.pairs = model, {}, 0.0, 0

    def score_pairs(self, questions, sentences, batch_size=None):
        import torch

        todo = sorted({(q, s) for q, s in zip(questions, sentences, strict=True)} - set(self.cache))
        if todo:
            start = time.perf_counter()
            values = self.model.score_pairs([q for q, _ in todo], [s for _, s in todo],
                                            batch_size).cpu().tolist()
            self.seconds += time.perf_counter() - start
            self.pairs += len(todo)
            self.cache.update(zip(todo, values, strict=True))
        return torch.tensor([self.cache[(q, s)] for q, s in zip(questions, sentences,
                                                                 strict=True)])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pipeline", required=True)
    p.add_argument("--dataset", default="reqa_squad")
    p.add_argument("--pool", default="dev")
    p.add_argument("--from-run-files", required=True)
    p.add_argument("--max-questions", type=int, default=None)
    p.add_argument("--ks", default="5,10,20")
    p.add_argument("--output", required=True)
    p.add_argument("--checkpoint", default=None,
                   help="the reranker export to use instead of the pipeline's")
    args = p.parse_args()
    from retrieval_qa.classifiers.reranker import CrossEncoderReranker
    from retrieval_qa.config import load_yaml
    from retrieval_qa.data import load_pool
    from retrieval_qa.evaluation import ledger
    from retrieval_qa.pipeline.composition import load_pipeline
    from retrieval_qa.pipeline.run import run_pipeline
    from retrieval_qa.pipeline.tuning import question_subset
    from retrieval_qa.portable_paths import portable
    from retrieval_qa.runtime import apply_threads

    apply_threads(None)
    overrides = [f"reranker.checkpoint={args.checkpoint}"] if args.checkpoint else []
    cfg = load_pipeline(args.pipeline, overrides)
    pool, _ = load_pool(args.dataset, args.pool)
    pool = question_subset(pool, args.max_questions, cfg.tuning.split_seed)
    reranker = CachedScores(CrossEncoderReranker.load(cfg.reranker.checkpoint))
    rows = []
    for k in sorted(int(x) for x in args.ks.split(",")):
        run_cfg = load_pipeline(args.pipeline, [*overrides, f"reranker.top_k={k}"])
        before = (reranker.seconds, reranker.pairs)
        out = run_pipeline(run_cfg, pool, Path("runs/pipeline") / f"{cfg.name}-k{k}",
                           from_run_files=args.from_run_files, reranker=reranker,
                           evaluation=load_yaml("eval/default.yaml"))
        ledger.record(dataset=pool.dataset, pool=pool.pool, metrics=out["metrics"],
                      questions=len(pool.questions), kind="pipeline", name=cfg.name,
                      settings=out["settings"], overrides=[*overrides, f"reranker.top_k={k}"],
                      subset=f"{args.max_questions} questions drawn with seed "
                             f"{cfg.tuning.split_seed}" if args.max_questions else None)
        rows.append({"k": k, "stages": out["stages"], "fusion": out["fusion"],
                     "new_pairs_scored": reranker.pairs - before[1],
                     "new_scoring_seconds": round(reranker.seconds - before[0], 2)})
    result = {"pipeline": cfg.name, "reranker": cfg.reranker.checkpoint,
              "dataset": pool.dataset, "pool": pool.pool,
              "questions": len(pool.questions), "candidates": len(pool.candidates),
              "question_subset": f"{len(pool.questions)} questions drawn with "
                                 "retrieval_qa.pipeline.tuning.question_subset(pool, "
                                 f"{args.max_questions}, seed={cfg.tuning.split_seed})",
              "pairs_scored": reranker.pairs, "scoring_seconds": round(reranker.seconds, 2),
              "seconds_per_pair": round(reranker.seconds / max(reranker.pairs, 1), 5),
              "rows": rows}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(portable(result), indent=1))
    print(json.dumps({r["k"]: r["stages"][-1]["metrics"]["mrr"] for r in rows}))


if __name__ == "__main__":
    main()
