"""Train the cross-encoder reranker on ReQA SQuAD training pairs with first-stage hard
negatives and export it as a sentence-transformers CrossEncoder folder:

    python -m retrieval_qa.pipeline.train_reranker [--config FILE] [key=value ...]

Settings: ``conf/pipeline/training/reranker.yaml`` (key=value overrides its keys). Prints one
JSON object (the settings, example counts, losses, time, the export folder)."""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader

from ..config import load_yaml, load_yaml_file, plain
from ..written import write_text


def _collate(model, listwise: bool):
    """Batches of pairs (``listwise`` false), or of groups (each a question's gold example
    and its negatives), flattened with each row's ``group``."""
    from ..data.classifier_pairs import encode_pairs

    def collate(items):
        examples = [e for group in items for e in group] if listwise else items
        enc = encode_pairs(model.tokenizer, [e.question for e in examples],
                           [e.sentence for e in examples], model.max_length)
        enc["labels"] = torch.tensor([e.label for e in examples], dtype=torch.float32)
        if listwise:
            enc["group"] = torch.tensor([g for g, group in enumerate(items) for _ in group])
        return enc
    return collate


def question_groups(examples: list) -> list[list]:
    """The examples of :func:`~.reranker_data.rerank_examples` (each question's gold example,
    then its negatives) cut into one group per question."""
    groups: list[list] = []
    for e in examples:
        if e.label == 1:
            groups.append([])
        groups[-1].append(e)
    return groups


def train_reranker(cfg: dict, data_dir=None, progress: bool = True) -> dict:
    import pytorch_lightning as pl

    from ..baselines.bm25 import BM25Scorer, BM25Settings
    from ..data import load_pool
    from ..data.reqa import reassemble
    from ..data.split import train_val_split
    from ..models.cross_encoder import CrossEncoderReranker
    from ..training.cross_classifier import LossRecorder
    from .reranker_data import bm25_top, rerank_examples
    from .tuning import question_subset

    if cfg["loss"] not in ("listwise", "bce"):  # before any data is read
        raise ValueError(f"loss={cfg['loss']!r}; expected listwise or bce")
    start = time.perf_counter()
    full, _ = load_pool(cfg["dataset"], cfg["pool"], data_dir)
    train_pairs, _ = train_val_split(full, cfg["val_fraction"], cfg["split_seed"])
    docs = {p.context for p in train_pairs}
    side = reassemble(full, f"{full.pool}-train-side",
                      [c for c in full.candidates if c.context in docs], train_pairs)
    pool = question_subset(side, cfg["questions"], cfg["seed"])
    scorer = BM25Scorer(pool, BM25Settings.from_config(load_yaml("model/bm25.yaml")),
                        progress=progress)
    top = bm25_top(pool, scorer, int(cfg["bm25_top_k"]))
    examples, counts = rerank_examples(pool, top, hard=int(cfg["hard_negatives"]),
                                       same_paragraph=int(cfg["same_paragraph_negatives"]),
                                       seed=int(cfg["seed"]))
    data_seconds = time.perf_counter() - start
    settings = CrossEncoderReranker.settings(cfg.get("model") or {})
    torch.manual_seed(int(cfg["seed"]))
    model = CrossEncoderReranker(**settings)
    batch_size = int(settings["training"]["batch_size"])
    listwise = cfg["loss"] == "listwise"
    items = question_groups(examples) if listwise else examples
    if listwise:  # batch_size pairs a step: as many whole groups as fit
        batch_size = max(1, batch_size // (1 + int(cfg["hard_negatives"])
                                           + int(cfg["same_paragraph_negatives"])))
    random.Random(int(cfg["seed"])).shuffle(items)
    loader = DataLoader(items, batch_size=batch_size, shuffle=True,
                        collate_fn=_collate(model, listwise),
                        generator=torch.Generator().manual_seed(int(cfg["seed"])))
    steps = int(cfg["epochs"]) * len(loader)
    recorder = LossRecorder(steps, 25, "reranker")
    max_time = ({"minutes": float(cfg["max_minutes"])} if cfg.get("max_minutes") else None)
    trainer = pl.Trainer(max_steps=steps, max_epochs=int(cfg["epochs"]),
                         accelerator=settings["training"]["accelerator"], devices=1,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0,
                         max_time=max_time, callbacks=[recorder])
    train_start = time.perf_counter()
    trainer.fit(model, train_dataloaders=loader)
    train_seconds = time.perf_counter() - train_start
    model.eval()
    folder = model.export(cfg["output"])
    losses = recorder.losses
    return {"output": str(folder), "pretrained": model.pretrained_checkpoint.label,
            "train_side_questions": len(side.questions), "questions": len(pool.questions),
            "candidates_bm25": len(pool.candidates), "examples": len(examples),
            "example_counts": counts, "steps_planned": steps, "steps_done": len(losses),
            "loss": cfg["loss"], "batch_size": batch_size,
            "batch_unit": "questions (groups)" if listwise else "pairs",
            "first_loss": round(losses[0], 4) if losses else None,
            "last_loss": round(statistics.fmean(losses[-25:]), 4) if losses else None,
            "data_seconds": round(data_seconds, 1), "train_seconds": round(train_seconds, 1),
            "settings": cfg}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=None,
                   help="a YAML file (default: conf/pipeline/training/reranker.yaml)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    args = p.parse_args(argv)
    from ..runtime import apply_threads
    from .composition import compose_file

    apply_threads(None)
    cfg = (load_yaml_file(args.config) if args.config
           else load_yaml("pipeline/training/reranker.yaml"))
    cfg = plain(compose_file(cfg, args.config or "conf/pipeline/training/reranker.yaml",
                             args.overrides))  # strict keys, conf/ranges.yaml
    import contextlib

    with contextlib.redirect_stdout(sys.stderr):  # libraries' prints stay off the JSON
        out = train_reranker(cfg, args.data_dir)
    print(json.dumps(out, default=str))
    write_text(Path(cfg["output"]) / "training.json", json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
