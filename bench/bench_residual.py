"""Residual-embedding pipeline costs, one torch thread by default:

1. encoding + caching the SQuAD dev paragraph task (10,570 questions, 2,067 paragraphs) with
   each static base embedding (GloVe 6B 50d, spaCy md 300d), with and without IDF: a cold run
   (cache miss: read the vectors, tokenise, pool, write the cache), then a warm run (cache
   hit: read the cached tensors; GloVe still reads its 400k-word index first, the spaCy
   key2row map is read only on a miss);
2. one FCRR epoch (``--refiners fcrr convrr`` adds a ConvRR epoch) over the cached train-file
   vectors (GloVe 6B 50d w/ IDF; 82,599 pairs, batch 512, batch-hard triplet loss, Adam),
   timed without validation, after the train task was embedded and cached (its time is
   reported apart).

The machine is shared: its load average at the start and end is recorded with the times.

Usage: python -m bench.bench_residual [--threads 1] [--models static:glove50 static:spacy_md]
           [--refiners fcrr] [--out results/residual/bench.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import torch

from bench.common import RESULTS, add_threads_arg, write_json
from retrieval_qa.data.paragraphs import load_paragraph_task
from retrieval_qa.data.vector_datamodule import ParagraphVectorDataModule, VectorSplit
from retrieval_qa.embeddings.base import task_embeddings
from retrieval_qa.registry import instantiate
from retrieval_qa.training.compose import load_group


def encode_and_cache(model: str, cache_dir: Path) -> dict:
    t = time.perf_counter()
    task = load_paragraph_task("dev")
    out: dict = {"model": model, "questions": len(task.questions),
                 "paragraphs": len(task.paragraphs),
                 "read_task_s": round(time.perf_counter() - t, 3)}
    for idf in (False, True):
        side = "idf" if idf else "plain"
        for run in ("cold", "warm"):
            t = time.perf_counter()
            q, _, meta = task_embeddings(task, model, idf, cache_dir=cache_dir)
            out[f"{side}_{run}_s"] = round(time.perf_counter() - t, 3)
            out[f"{side}_{run}_cache"] = meta["cache"]
        out[f"{side}_pool_s"] = meta.get("compute_seconds")   # tokenise + pool, in the cold run
        out["dim"] = int(q.shape[1])
        out["package"] = meta.get("package")
    folder = Path(meta["cache_folder"])
    out["cache_bytes_idf"] = sum(f.stat().st_size for f in folder.iterdir())
    return out


def one_epoch(refiner: str, split: VectorSplit) -> dict:
    data = load_group("data", "squad_paragraphs")  # the paper's settings, from conf/
    dm = ParagraphVectorDataModule(split, None, val_questions=data.val_questions,
                                   batch_size=data.batch_size,
                                   eval_batch_size=data.eval_batch_size, max_train_pairs=None,
                                   seed=data.split_seed)
    torch.manual_seed(0)
    module = instantiate(load_group("model", "residual"), "model",
                         dim=split.questions.shape[1], refiner=refiner)
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
            "last_loss": round(float(loss.detach()), 4), "under_a_minute": seconds < 60}


def main() -> None:
    ap = argparse.ArgumentParser()
    add_threads_arg(ap)
    ap.add_argument("--models", nargs="+", default=["static:glove50", "static:spacy_md"])
    ap.add_argument("--refiners", nargs="+", default=["fcrr"], choices=["fcrr", "convrr",
                                                                         "fcrr_convrr"])
    ap.add_argument("--out", default=str(RESULTS / "residual" / "bench.json"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    report = {"threads": args.threads, "torch": torch.__version__,
              "python": platform.python_version(), "cpus": os.cpu_count(),
              "load_average_start": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory() as tmp:
        report["encode_cache_dev"] = [encode_and_cache(m, Path(tmp)) for m in args.models]
        t = time.perf_counter()
        task = load_paragraph_task("train")
        q, p, meta = task_embeddings(task, "static:glove50", True, cache_dir=Path(tmp))
        report["train_task"] = {"model": "static:glove50", "idf": True,
                                "questions": len(task.questions),
                                "paragraphs": len(task.paragraphs), "cache": meta["cache"],
                                "read_embed_cache_s": round(time.perf_counter() - t, 2)}
        split = VectorSplit(q, p, torch.tensor(task.gold))
        report["epochs"] = [one_epoch(r, split) for r in args.refiners]
    report["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    write_json(report, args.out)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
