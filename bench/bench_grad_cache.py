"""Peak memory and time of one training step of the MiniLM dual encoder at a large global
batch: the plain in-batch softmax against gradient caching (GradCache: the same gradients,
tested in tests/models/test_grad_cache.py), and against sentence-transformers'
CachedMultipleNegativesRankingLoss (the same procedure) with the same mini-batch, each in a
fresh process so its peak resident memory (ru_maxrss) is its own.

All runs: the packaged all-MiniLM-L6-v2, mean pooling, cosine x 20, the first ``--batch``
ReQA SQuAD training pairs (no duplicates needed for a memory figure), 64 question / 96 answer
tokens, one torch thread unless ``--threads``. Memory is the process's peak RSS after one
step minus its RSS after loading the model and the batch (the step's own growth), and the
absolute peak.

Usage: HF_HUB_OFFLINE=1 python -m bench.bench_grad_cache [--batch 512] [--mini-batch 32]
       [--out results/bench_grad_cache.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

from bench.common import RESULTS, add_threads_arg, command, run_json, towers_config, write_json
from bench.training_sides import LOSS, OPTIMIZER


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def pairs(n: int):
    from retrieval_qa.data.loading import load_pool

    pool, _ = load_pool("reqa_squad", "train")
    return pool.pairs[:n]


def run_ours(batch: int, mini_batch: int | None) -> dict:
    import torch

    from retrieval_qa.data.collate import PairCollator
    from retrieval_qa.models.dual_encoder import DualEncoderModule
    from retrieval_qa.models.grad_cache import grad_cache_step
    from retrieval_qa.pretrained import load_tokenizer, resolve_pretrained
    from retrieval_qa.registry import config_values
    from retrieval_qa.training.compose import load_group

    towers = towers_config(None, None)
    towers["encoder"]["fallback"] = "minilm"
    module = DualEncoderModule(
        towers, LOSS, OPTIMIZER, gradient_cache={"mini_batch_size": None},
        evaluation=config_values(load_group("eval", "default")))
    module.eval()  # no dropout: the same step on both paths
    tokenizer = load_tokenizer(resolve_pretrained("minilm", fallback="minilm"))
    b = PairCollator(tokenizer, 64, 96)([(i, p) for i, p in enumerate(pairs(batch))])
    base = rss_mb()
    start = time.perf_counter()
    if mini_batch is None:
        q, a, _ = module.towers.encode_pair(b["question"], b["answer"])
        loss = module.loss(q, a)
        loss.backward()
    else:
        loss, _ = grad_cache_step(module.towers.question_tower.encode,
                                  module.towers.answer_tower.encode, b["question"],
                                  b["answer"], module.loss, mini_batch, torch.Tensor.backward)
    return {"loss": round(float(loss), 6), "seconds": round(time.perf_counter() - start, 2),
            "step_growth_mb": round(rss_mb() - base, 1), "peak_rss_mb": round(rss_mb(), 1)}


def run_st(batch: int, mini_batch: int) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer, losses

    from retrieval_qa.pretrained import resolve_pretrained

    model = SentenceTransformer(str(resolve_pretrained("minilm", fallback="minilm").path_or_name),
                                device="cpu")
    model.eval()
    loss_fn = losses.CachedMultipleNegativesRankingLoss(model, scale=20.0,
                                                        mini_batch_size=mini_batch)
    ps = pairs(batch)
    model.max_seq_length = 64
    q = model.tokenize([p.question for p in ps])
    model.max_seq_length = 96
    a = model.tokenize([p.answer for p in ps])
    base = rss_mb()
    start = time.perf_counter()
    loss = loss_fn([q, a], torch.zeros(batch))
    loss.backward()
    return {"loss": round(float(loss), 6), "seconds": round(time.perf_counter() - start, 2),
            "step_growth_mb": round(rss_mb() - base, 1), "peak_rss_mb": round(rss_mb(), 1)}


def child(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    if args.side == "st":
        out = run_st(args.batch, args.mini_batch)
    else:
        out = run_ours(args.batch, None if args.side == "plain" else args.mini_batch)
    print(json.dumps(out))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--mini-batch", type=int, default=32)
    add_threads_arg(p)
    p.add_argument("--side", choices=("plain", "cached", "st"), help=argparse.SUPPRESS)
    p.add_argument("--out", default=str(RESULTS / "bench_grad_cache.json"))
    args = p.parse_args()
    if args.side:
        return child(args)
    rows = {}
    for side in ("plain", "cached", "st"):
        print(f"bench_grad_cache: {side} ...", file=sys.stderr, flush=True)
        rows[side] = run_json(["-m", __spec__.name, "--side", side, "--batch", str(args.batch),
                               "--mini-batch", str(args.mini_batch), "--threads",
                               str(args.threads)])
    out = {"batch": args.batch, "mini_batch": args.mini_batch, "threads": args.threads,
           "model": "all-MiniLM-L6-v2 (packaged), mean pooling, cosine x 20", "rows": rows,
           "memory_ratio_plain_over_cached": round(
               rows["plain"]["step_growth_mb"] / max(rows["cached"]["step_growth_mb"], 1), 2),
           "time_ratio_cached_over_plain": round(
               rows["cached"]["seconds"] / rows["plain"]["seconds"], 2),
           "time_ratio_st_cached_over_ours_cached": round(
               rows["st"]["seconds"] / rows["cached"]["seconds"], 2),
           "command": command(__spec__.name, None)}
    write_json(out, args.out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
