"""``--loop phases`` of the training bench (the default on the CPU): both sides step by step
on the same training pairs, each phase of each step timed (tokenise, forward, backward,
optimiser; on CUDA with a ``torch.cuda.synchronize`` at every phase boundary, so the phases
add up to the step but the GPU idles between them: for the breakdown, not for speed).

Steps alternate between the two sides (ours then ST on even steps, ST then ours on odd ones)
so machine drift hits both alike. Ours draws its batches from our ``NoDuplicatesBatchSampler``
with length buckets by token count (the training default, ``data.bucket_unit: tokens``), over
the ``--pool`` of ReQA SQuAD; ST, with ``--batches own``, from its own sampler (see
:func:`bench.training_sides.pair_up`). No Trainer loop on either side.
"""

from __future__ import annotations

import statistics
import time

import torch

from bench.common import (
    device_info,
    gpu_id,
    machine,
    print_machine,
    print_utilisation,
    st_model_path,
    write_result,
)
from bench.gpu_utilisation import Utilisation
from bench.training_sides import (
    LR,
    PHASES,
    TOKEN_KEYS,
    WEIGHT_DECAY,
    Ours,
    Side,
    batches,
    pair_up,
    plan_tokens,
    print_check,
    st_optimizer_label,
    st_side,
    summary,
)


def profile_step(side: Side, pairs, idx, step: int, rows: int = 12) -> str:
    """torch.profiler table (self CPU time) of one training step of ``side``."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        side.step(pairs, idx, step)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def run_phases(args, device: torch.device, precision: str) -> dict:
    """Both sides step by step (see the module docstring); writes and returns the JSON."""
    from retrieval_qa.data import load_pool
    from retrieval_qa.pretrained import load_tokenizer

    wall = time.perf_counter()
    info = machine(torch.get_num_threads())
    pool, _ = load_pool("reqa_squad", args.pool)
    pairs = pool.pairs
    mq, ma = args.max_question_length, args.max_answer_length
    count = args.warmup + args.steps + args.profile
    tokenizer = load_tokenizer(args.model or "minilm")
    chunk_rows = args.chunk_rows or None
    ours = Ours(tokenizer, mq, ma, chunk_rows, args.model, device, precision)
    st = st_side(args, mq, ma, device, precision)
    plans, check = pair_up(ours, st, pairs,
                           batches(pairs, args.batch_size, count, mq, ma, tokenizer), args)

    times: dict[str, list[dict[str, float]]] = {ours.name: [], st.name: []}
    losses: dict[str, list[float]] = {ours.name: [], st.name: []}
    tokens = {side.name: dict.fromkeys(TOKEN_KEYS, 0) for side in (ours, st)}
    with Utilisation(gpu_id(device)) as util:
        for k in range(args.warmup + args.steps):
            order = (ours, st) if k % 2 == 0 else (st, ours)
            for side in order:
                idx = plans[side.name][k]
                if k < args.warmup:
                    side.step(pairs, idx, k)
                    continue
                with util.region(side.name):
                    loss, phases = side.step(pairs, idx, k)
                times[side.name].append(phases)
                losses[side.name].append(float(loss))
                plan_tokens(ours, pairs, [idx], chunk_rows if side is ours else None,
                            tokens[side.name])
    tables = {}
    if args.profile:
        for side in (ours, st):
            tables[side.name] = profile_step(side, pairs, plans[side.name][-1], count - 1)

    n_pairs = args.steps * args.batch_size
    o = [sum(t.values()) for t in times[ours.name]]
    s = [sum(t.values()) for t in times[st.name]]
    per_step = [b / a for a, b in zip(o, s, strict=True)]  # >1: ours faster on that step
    st_opt = st_optimizer_label(args)
    out = {
        "benchmark": "training throughput, MiniLM dual encoder, in-batch softmax (cosine x20)",
        "command": args.command,
        "machine": info,
        "device": device_info(device, precision, info["cpu"]),
        "settings": {"loop": "phases", "pool": f"reqa_squad/{args.pool}",
                     "pairs_in_pool": len(pairs),
                     "batch_size": args.batch_size, "timed_steps": args.steps,
                     "warmup_steps": args.warmup, "max_question_length": mq,
                     "max_answer_length": ma, "lr": LR, "weight_decay": WEIGHT_DECAY,
                     "precision": precision, "model": st_model_path(args.model),
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
        "ours_steps_per_s": args.steps / sum(o),
        "sentence_transformers_steps_per_s": args.steps / sum(s),
        "ratio_ours_over_st": sum(s) / sum(o),
        # the batches of --batches own hold different texts: the same ratio per real
        # (non-padding) token trained, which does not depend on which texts were drawn
        "ratio_real_tokens_per_s": (tokens[ours.name]["real"] / sum(o))
        / (tokens[st.name]["real"] / sum(s)),
        "median_paired_step_ratio": statistics.median(per_step),
        "median_phase_s": {k: summary(v) for k, v in times.items()},
        "mean_train_loss": {k: statistics.fmean(v) for k, v in losses.items()},
        "gpu_utilization": util.report((ours.name, st.name)),
        "goal_ratio": 1.3,
    }
    if tables:
        out["profile_tables"] = tables
    write_result(out, args.out, wall)

    print_machine(out)
    print_check(check, "eval mode, same weights")
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
    print_utilisation(out, device)
    for name, table in tables.items():
        print(f"\n--- profile of one step: {name} ---\n{table}")
    return out
