"""The two training set-ups the training bench compares (bench/bench_training.py), and
what both of its loops share: the batches each side draws, the tokens a batch holds, and the
first-batch check that both sides compute the same loss and gradients.

* ours: ``PairCollator`` -> ``DualEncoderModule.training_step`` (``bench.common.TOWERS``,
  ``encoder.chunk_rows``, ``InBatchSoftmaxLoss(cosine, 20)``) -> ``loss.backward()`` ->
  ``AdamW.step()``, i.e. what Lightning's automatic optimisation runs per step.
* sentence-transformers: ``model.preprocess`` per column (64 / 96 tokens) ->
  ``MultipleNegativesRankingLoss(scale=20, cos_sim)`` -> ``loss.backward()`` ->
  ``AdamW.step()``, i.e. what ``SentenceTransformerTrainer`` runs per step.

:class:`Side` times a step by phase; the VAE bench (bench/bench_vae.py) times its methods
with :class:`ModuleSide` too.
"""

from __future__ import annotations

import statistics
import time

import torch

from bench.common import (
    autocast,
    grad_scaler,
    move,
    st_model_path,
    synchronize,
    towers_config,
)

LR, WEIGHT_DECAY, SCALE = 5e-5, 0.01, 20.0
LOSS = {"similarity": "cosine", "scale": SCALE, "symmetric": False,
        "gather_across_processes": False, "penalty_coef": 0.0}
OPTIMIZER = {"name": "adamw", "lr": LR, "weight_decay": WEIGHT_DECAY, "schedule": "constant"}
PHASES = ("tokenize", "forward", "backward", "optimizer")
TOKEN_KEYS = ("real", "real_sq", "padded", "encoded")


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
    return first_batches(sampler, count, batch_size)


def st_batches(pairs, batch_size: int, count: int) -> list[list[int]]:
    """The first ``count`` batches of sentence-transformers' own ``NoDuplicatesBatchSampler``
    (seed 0) over the same pairs: what ``SentenceTransformerTrainer`` draws with
    ``batch_sampler=BatchSamplers.NO_DUPLICATES``, MNRL's recommended sampler (random
    batches, no length grouping)."""
    from datasets import Dataset
    from sentence_transformers.base.sampler import NoDuplicatesBatchSampler

    data = Dataset.from_dict({"anchor": [p.question for p in pairs],
                              "positive": [p.answer for p in pairs]})
    return first_batches(NoDuplicatesBatchSampler(data, batch_size, drop_last=True, seed=0), count,
                  batch_size)


def first_batches(sampler, count: int, batch_size: int) -> list[list[int]]:
    """The first ``count`` batches ``sampler`` yields; too few is a clear error."""
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
    """Real, padded and encoded (with ``chunk_rows``) tokens of a batch, both sides summed,
    and ``real_sq``, each text's real length squared, summed (attention's FLOPs; ours'
    collation, on the CPU: the same ids as ST's, checked by :func:`agreement`)."""
    b = ours.collate([(i, pairs[i]) for i in idx])
    out = dict.fromkeys(TOKEN_KEYS, 0)
    for part in ("question", "answer"):
        mask = b[part]["attention_mask"]
        out["real"] += int(mask.sum())
        out["real_sq"] += int((mask.sum(1) ** 2).sum())
        out["padded"] += mask.numel()
        out["encoded"] += encoded_tokens(mask, chunk_rows)
    return out


def plan_tokens(ours: Ours, pairs, plan, chunk_rows: int | None,
                totals: dict[str, int] | None = None) -> dict[str, int]:
    """:func:`batch_tokens` summed over the batches of ``plan`` (added to ``totals``)."""
    totals = dict.fromkeys(TOKEN_KEYS, 0) if totals is None else totals
    for idx in plan:
        for key, value in batch_tokens(ours, pairs, idx, chunk_rows).items():
            totals[key] += value
    return totals


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


class ModuleSide(Side):
    """A LightningModule's ``training_step`` (``self.module``) on ``PairCollator`` batches
    (``self.collate``): what Lightning's automatic optimisation runs per step."""

    module: torch.nn.Module
    collate: object

    def inputs(self, pairs, idx):
        return self.collate([(i, pairs[i]) for i in idx])

    def loss(self, batch, step: int = 0) -> torch.Tensor:
        return self.module.training_step(batch, step)


class Ours(ModuleSide):
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
        self.tokenized: dict | None = None  # the matched set-up's batches, tokenised before
        self.max_q, self.max_a = max_q, max_a
        self.criterion = MultipleNegativesRankingLoss(self.model, scale=SCALE,
                                                      similarity_fct=cos_sim)
        # SentenceTransformerTrainer's default optimiser on torch >= 2.8 is
        # "adamw_torch_fused", i.e. torch AdamW(fused=True); --st-optimizer plain drops fused.
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=LR,
                                           weight_decay=WEIGHT_DECAY, fused=fused or None)

    def inputs(self, pairs, idx):
        cached = self.tokenized.get(tuple(idx)) if self.tokenized else None
        if cached is not None:
            return cached
        q = self.model.preprocess([pairs[i].question for i in idx], max_length=self.max_q)
        a = self.model.preprocess([pairs[i].answer for i in idx], max_length=self.max_a)
        return [q, a]

    def pretokenize(self, pairs, plan, multiple: int | None) -> None:
        """The ``matched`` set-up: every batch of ``plan`` tokenised before the clock (as
        ours is: ``data.pretokenize``), padded to a multiple of ``multiple`` tokens (as
        ours: ``data.pad_to_multiple_of``; the shapes repeat) and, on CUDA, in page-locked
        memory (as our loader's ``pin_memory``)."""
        self.tokenized = {}
        for idx in plan:
            features = [pad_to_multiple(f, multiple) for f in self.inputs(pairs, idx)]
            if self.device.type == "cuda":
                features = [{k: v.pin_memory() if torch.is_tensor(v) else v
                             for k, v in f.items()} for f in features]
            self.tokenized[tuple(idx)] = features

    def compile(self, setting) -> str:
        """torch.compile the transformer in place, as ``trainer.compile`` does ours
        (retrieval_qa.training.compile); returns the mode."""
        from retrieval_qa.training.compile import BACKEND, compile_mode

        mode = compile_mode(setting)
        self.model[0].auto_model.compile(mode=None if mode == "default" else mode,
                                         backend=BACKEND, dynamic=None)
        return mode

    def loss(self, features, step: int = 0) -> torch.Tensor:
        return self.criterion(features, None)

    def named_parameters(self):
        return dict(self.model[0].auto_model.named_parameters())

    def ids(self, features):
        return features[0]["input_ids"], features[1]["input_ids"]

    def mode(self, train: bool) -> None:
        self.model.train(train)


def pad_to_multiple(features: dict, multiple: int | None) -> dict:
    """A tokenised batch's tensors padded on the right to a multiple of ``multiple`` tokens
    (ids and types with 0, the attention mask with 0: the same model output)."""
    ids = features["input_ids"]
    if not multiple or ids.shape[1] % multiple == 0:
        return dict(features)
    extra = multiple - ids.shape[1] % multiple
    return {k: torch.nn.functional.pad(v, (0, extra)) if torch.is_tensor(v) and v.dim() == 2
            else v for k, v in features.items()}


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


def st_side(args, max_q: int, max_a: int, device: torch.device, precision: str
            ) -> SentenceTransformers:
    """The sentence-transformers side of the bench's options (``--model``,
    ``--st-optimizer``)."""
    return SentenceTransformers(st_model_path(args.model), max_q, max_a,
                                fused=args.st_optimizer == "fused", device=device,
                                precision=precision)


def st_optimizer_label(args) -> str:
    return "AdamW(fused=True)" if args.st_optimizer == "fused" else "AdamW()"


def pair_up(ours: Ours, st: SentenceTransformers, pairs, plan: list[list[int]], args
            ) -> tuple[dict[str, list[list[int]]], dict]:
    """Each side's batches (ours ``plan``; ST with ``--batches own`` the first batches of its
    own sampler, with ``same`` ``plan``) and the first-batch :func:`agreement`; both sides
    are left in training mode."""
    plans = {ours.name: plan}
    plans[st.name] = (plan if args.batches == "same"
                      else st_batches(pairs, args.batch_size, len(plan)))
    check = agreement(ours, st, pairs, plan[0])
    ours.mode(True)
    st.mode(True)
    return plans, check


def summary(times: list[dict[str, float]]) -> dict[str, float]:
    """The median seconds of each phase over the steps ``times``."""
    return {ph: statistics.median(t[ph] for t in times) for ph in PHASES}

