"""Residual-embedding pipeline costs (issue 12), one thread:

1. encoding + caching the dev paragraph task (10,570 questions, 2,067 paragraphs) with GloVe
   6B 50d, with and without IDF: a cold run (cache miss: tokenise, pool, write), then a warm
   run (cache hit: read);
2. one FCRR epoch (and one ConvRR epoch) over the cached train-file vectors (82,599 pairs,
   batch 512, batch-hard triplet loss, Adam), timed without validation.

Usage: python bench/bench_residual.py [--threads 1] [--out results/residual/bench.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from retrieval_qa.data.paragraphs import load_paragraph_task  # noqa: E402
from retrieval_qa.data.vector_datamodule import ParagraphVectorDataModule, VectorSplit  # noqa: E402
from retrieval_qa.embeddings.base import task_embeddings  # noqa: E402
from retrieval_qa.models.residual import ResidualRefinementModule  # noqa: E402


def encode_and_cache(cache_dir: Path) -> dict:
    out = {}
    task = load_paragraph_task("dev")
    for idf in (False, True):
        for run in ("cold", "warm"):
            t = time.perf_counter()
            _, _, meta = task_embeddings(task, "static:glove50", idf, cache_dir=cache_dir)
            out[f"{'idf' if idf else 'plain'}_{run}_s"] = round(time.perf_counter() - t, 3)
            out[f"{'idf' if idf else 'plain'}_{run}_cache"] = meta["cache"]
    return out


def one_epoch(refiner: str, cache_dir: Path) -> dict:
    task = load_paragraph_task("train")
    q, p, _ = task_embeddings(task, "static:glove50", True, cache_dir=cache_dir)
    dm = ParagraphVectorDataModule(VectorSplit(q, p, torch.tensor(task.gold)), None, 5000, 512)
    torch.manual_seed(0)
    module = ResidualRefinementModule(dim=q.shape[1], refiner=refiner)
    opt = module.configure_optimizers()
    module.train()
    steps, t = 0, time.perf_counter()
    for batch in dm.train_dataloader():
        opt.zero_grad()
        loss = module.compute_loss(*batch)
        loss.backward()
        opt.step()
        steps += 1
    seconds = time.perf_counter() - t
    return {"refiner": refiner, "steps": steps, "pairs": int(dm.train_index.numel()),
            "epoch_s": round(seconds, 2), "ms_per_step": round(1000 * seconds / steps, 2),
            "parameters": sum(x.numel() for x in module.parameters()),
            "last_loss": round(float(loss), 4)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="results/residual/bench.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        report = {"threads": args.threads, "torch": torch.__version__,
                  "encode_cache_dev": encode_and_cache(Path(tmp)),
                  "epochs": [one_epoch(r, Path(tmp)) for r in ("fcrr", "convrr")]}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
