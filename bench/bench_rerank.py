"""The pipeline's reranking: questions reranked per second by :func:`~retrieval_qa.pipeline.reranking.
head_scores` (one reranker call per shard of questions, the shard's pairs in length order)
against the loop it replaced (one call per question, its head's pairs in fused order), side
by side.

Both sides score the same heads with the same cross-encoder, batch size and torch threads:
the top ``--top-k`` of BM25 with context (the pipeline's best single first stage) for a seeded
sample of ReQA SQuAD dev questions. The cross-encoder is ``--reranker`` (an export, e.g.
``runs/reranker/listwise``) or, by default, the reranker's network over the packaged
all-MiniLM-L6-v2 with an untrained head (it scores as fast as a trained one), at the listwise
recipe's ``max_length`` 128. The max absolute difference of the two sides' scores is reported
(padding changes float sums in their last bits only). Rounds alternate the order of the sides
(ABBA) after an untimed warm-up.

Usage: HF_HUB_OFFLINE=1 python -m bench.bench_rerank [--questions 256] [--top-k 10]
       [--batch-size 64] [--rounds 2] [--threads 1] [--reranker DIR]
       [--out results/bench_rerank.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

from bench.common import RESULTS, add_threads_arg, command, machine, write_result


def heads(questions: int, top_k: int, seed: int):
    """A sample of dev questions and their fused lists (BM25 with context, ``top_k`` each)."""
    from retrieval_qa.data import load_pool
    from retrieval_qa.data.subsets import question_subset
    from retrieval_qa.pipeline.composition import load_pipeline
    from retrieval_qa.pipeline.stages import run_retriever

    pool = question_subset(load_pool("reqa_squad", "dev")[0], questions, seed)
    stage = load_pipeline("bm25_context").retrievers[0]
    run = run_retriever(stage, pool, top_k, ks=(1,), doc_level=False, memory_mb=512)
    return pool, run.lists()


def per_question(pool, fused, score_pairs, top_k: int) -> list[np.ndarray]:
    """The loop before: a call per question, its head in fused order."""
    from retrieval_qa.pipeline.fused_ranks import ordered

    out = []
    for q, (ids, scores) in enumerate(fused):
        head = np.asarray(ids)[ordered(np.asarray(ids), np.asarray(scores))[:top_k]]
        out.append(np.asarray(score_pairs([pool.questions[q]] * len(head),
                                          [pool.candidates[c].text for c in head])))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=256)
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=64, help="pairs per forward pass "
                    "(conf/pipeline/stages/cross_encoder.yaml's)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reranker", default=None, help="a cross-encoder export (default: "
                    "MiniLM with an untrained head)")
    add_threads_arg(ap)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(RESULTS / "bench_rerank.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    from retrieval_qa.classifiers.reranker import CrossEncoderReranker
    from retrieval_qa.pipeline.reranking import SHARD_QUESTIONS, head_scores

    wall, info = time.perf_counter(), machine(torch.get_num_threads())  # the load before
    pool, fused = heads(args.questions, args.top_k, args.seed)
    if args.reranker:
        model = CrossEncoderReranker.load(args.reranker).eval()
    else:
        torch.manual_seed(args.seed)
        model = CrossEncoderReranker(**CrossEncoderReranker.settings(
            {"pretrained": "minilm", "max_length": 128})).eval()

    def score_pairs(questions, sentences):
        return model.score_pairs(questions, sentences, args.batch_size).numpy()

    sides = {"ours (a call per shard, length order)":
             lambda: [v for _, v in head_scores(pool, fused, score_pairs, args.top_k)],
             "a call per question (fused order)":
             lambda: per_question(pool, fused, score_pairs, args.top_k)}
    score_pairs(pool.questions[:8], [c.text for c in pool.candidates[:8]])  # warm-up
    times: dict[str, list[float]] = {name: [] for name in sides}
    scores: dict[str, list[np.ndarray]] = {}
    for r in range(args.rounds):
        for name in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
            start = time.perf_counter()
            scores[name] = sides[name]()
            times[name].append(time.perf_counter() - start)
    rate = {name: len(fused) / statistics.median(t) for name, t in times.items()}
    ours, before = list(sides)
    result = {
        "benchmark": "pipeline reranking: questions reranked per second",
        "command": command("bench.bench_rerank", argv),
        "questions": len(fused), "top_k": args.top_k,
        "pairs": int(sum(len(v) for v in scores[ours])),
        "heads_from": "BM25 with context, top-k of sampled ReQA SQuAD dev questions",
        "reranker": args.reranker or "CrossEncoderReranker over all-MiniLM-L6-v2, untrained head",
        "max_length": model.max_length, "batch_size": args.batch_size,
        "shard_questions": SHARD_QUESTIONS, "rounds": args.rounds,
        "seconds": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "questions_per_second": {k: round(v, 3) for k, v in rate.items()},
        "ratio_ours_over_per_question": round(rate[ours] / rate[before], 3),
        "max_abs_score_difference": float(max(np.abs(a - b).max() for a, b in
                                              zip(scores[ours], scores[before], strict=True))),
        "machine": info,
    }
    write_result(result, args.out, wall)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
