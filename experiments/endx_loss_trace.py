"""Trace every term of the ENDX loss (eq. 13) over the first training steps of an experiment,
without Lightning, validation or checkpoints: a quick way to see whether the cross-encoder
learns and how large each GAM term is before committing to a full run.

    python experiments/endx_loss_trace.py --steps 100 experiment=endx_gru profile=cpu
    python experiments/endx_loss_trace.py --steps 1 experiment=endx_gru profile=cpu \\
        model.gam.exclude_self=true

Prints one JSON line every ``--every`` steps (step, seconds, and the module's training logs:
the dual and cross losses, the GAM total, its four unweighted KL terms and their weights, the
mean norms of the dual and cross question embeddings) and a last line with the first and last
records. The GAM weights follow the experiment's schedule at the fractional epoch of each step.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from retrieval_qa.data.datamodule import ReQADataModule
from retrieval_qa.models.endx import EndxModule
from retrieval_qa.models.method import encoder_settings, set_vocab_size
from retrieval_qa.models.optim import build_optimizer
from retrieval_qa.pretrained import load_tokenizer, resolve_pretrained
from retrieval_qa.registry import config_values, instantiate
from retrieval_qa.training.compose import compose


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100, help="optimiser steps (default 100)")
    ap.add_argument("--every", type=int, default=10, help="print every N steps (default 10)")
    ap.add_argument("overrides", nargs="+", help="experiment=NAME [profile=cpu] [key=value ...]")
    args = ap.parse_args(argv)
    cfg = compose(args.overrides)
    torch.manual_seed(cfg.seed)
    enc = encoder_settings(cfg, cfg.model.towers.encoder)
    tokenizer = load_tokenizer(resolve_pretrained(enc.pretrained, fallback=enc.fallback))
    set_vocab_size(enc, tokenizer)  # as rqa train: a random token table, one row per id
    data = ReQADataModule.from_config(cfg.data, tokenizer)
    data.setup("fit")
    module = instantiate(cfg.model, "model", evaluation=config_values(cfg.eval))
    if not isinstance(module, EndxModule):
        raise SystemExit(f"experiment={cfg.experiment} is not an ENDX experiment")
    module.train()
    optimizer = build_optimizer(module.parameters(), module.optimizer_cfg)
    loader = data.train_dataloader()
    per_epoch = len(loader)
    records, start, step = [], time.perf_counter(), 0
    while step < args.steps:
        for batch in loader:
            loss, logs = module.losses(batch, epoch=step / per_epoch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % args.every == 0 or step == args.steps - 1:
                rec = {"step": step, "seconds": round(time.perf_counter() - start, 1),
                       **{k.removeprefix("train/"): round(float(
                           v.detach() if torch.is_tensor(v) else v), 4)  # no grad-to-scalar
                          for k, v in logs.items()}}
                records.append(rec)
                print(json.dumps(rec), flush=True)
            step += 1
            if step >= args.steps:
                break
    print(json.dumps({"experiment": cfg.experiment, "profile": cfg.profile,
                      "overrides": args.overrides, "steps": step, "first": records[0],
                      "last": records[-1]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
