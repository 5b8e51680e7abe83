"""``--loop trainer`` of the training bench (the default on CUDA): what users run.

Ours is ``rqa train``'s path: the config of ``--experiment`` / ``--config-profile`` (default
``dual_bert``, profile ``gpu`` on CUDA and ``cpu`` on the CPU) with the bench's batch size,
lengths, loss (cosine x20) and optimiser settings (AdamW lr 5e-5, weight decay 0.01,
constant) and ``--override``s; the data module's ``train_dataloader`` (its ``num_workers`` /
``pin_memory`` as configured) and the LightningModule's ``training_step`` and optimiser in a
Lightning ``Trainer`` (precision from ``--precision``, ``limit_val_batches=0``, no logger, no
checkpoints, ``max_steps`` = warm-up + timed steps, the config's other Trainer settings). A
callback reads the clock, after a synchronize, only at the end of step ``--warmup`` and of
the last step of each of ``--rounds`` rounds of the timed steps; each side's figure is the
median steps/s of its rounds (every round is reported).

``--setup``: ``out-of-box`` (the default) compares each side as it is used; ``matched`` gives
ST ours' advantages too (its batches tokenised before the clock, padded alike, and compiled
where ours is), so that the ratio left is the engines' own (:data:`SETUPS`). Beside the
rates: each side's model FLOPs per step, achieved TFLOP/s and MFU against the device's peak
(bench/measures.py), and NVML's busy share, which measures something else.

Sentence-transformers runs its own training step in a plain loop over the same training pairs
(the data module's): ``model.preprocess`` per column each step, ``.to(device)``, MNRL forward
under ``torch.autocast`` (bf16 for bf16-mixed, fp16 with a GradScaler for 16-mixed: its
trainer with ``bf16=True`` / ``fp16=True``), backward, ``AdamW(fused=True)``; no gradient
clipping, schedule or logging (its trainer adds those), one synchronize at each end of the
timed steps. The sides run one after the other (ST first). GPU utilisation is sampled during
each side's timed steps.
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
    timer,
    write_result,
)
from bench.gpu_utilisation import Utilisation
from bench.measures import FLOPS_FORMULA, round_bounds, training_flops, utilisation
from bench.training_sides import (
    LR,
    SCALE,
    WEIGHT_DECAY,
    Ours,
    SentenceTransformers,
    first_batches,
    pair_up,
    plan_tokens,
    print_check,
    st_optimizer_label,
    st_side,
)


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

    from retrieval_qa.training.trainer import RUNNER_KEYS

    accepted = set(inspect.signature(pl.Trainer.__init__).parameters)
    config = {k: v for k, v in OmegaConf.to_container(cfg.trainer, resolve=True).items()
              if k not in RUNNER_KEYS}
    dropped = sorted(k for k in config if k not in accepted)
    passed = {k: v for k, v in config.items() if k in accepted}
    return {**passed, **forced_trainer_args(device, precision, max_steps)}, dropped


def step_timer(device: torch.device, bounds: list[int], util: Utilisation, label: str):
    """A Lightning callback that reads the clock (after a synchronize) only at the end of the
    global steps ``bounds`` (the last warm-up step, then each round's last), counting the
    batches between, and keeps each timed step's loss (detached, on the device: no host
    sync)."""
    import pytorch_lightning as pl

    class StepTimer(pl.Callback):
        def __init__(self) -> None:
            self.clock: list[float] = []
            self.batches = self.timed_batches = 0
            self.first = 0
            self.losses: list[torch.Tensor] = []
            self.loader = None

        @property
        def start(self):
            return self.clock[0] if self.clock else None

        @property
        def end(self):
            return self.clock[-1] if len(self.clock) == len(bounds) else None

        def on_train_start(self, trainer, pl_module) -> None:
            self.loader = trainer.train_dataloader

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            self.batches += 1
            step = trainer.global_step
            if self.start is not None and self.end is None:
                loss = outputs["loss"] if isinstance(outputs, dict) else outputs
                self.losses.append(loss.detach())
            if len(self.clock) < len(bounds) and step == bounds[len(self.clock)]:
                self.clock.append(timer(device))
                if len(self.clock) == 1:
                    self.first = self.batches
                    util.begin(label)
                elif self.end is not None:
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


def time_st_loop(st: SentenceTransformers, pairs, plan, bounds: list[int],
                 util: Utilisation) -> dict:
    """ST's plain loop: the warm-up steps untimed, then each round (``bounds``) between two
    synchronizes."""
    for k in range(bounds[0]):
        st.step(pairs, plan[k], k, phases=False)
    losses, clock = [], [timer(st.device)]
    with util.region(st.name):
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            for k in range(lo, hi):
                losses.append(st.step(pairs, plan[k], k, phases=False)[0])
            clock.append(timer(st.device))
    return {"seconds": clock[-1] - clock[0], "steps": bounds[-1] - bounds[0],
            "round_seconds": [b - a for a, b in zip(clock, clock[1:], strict=False)],
            "mean_train_loss": float(torch.stack(losses).float().mean())}


def time_trainer(cfg, module, data, device: torch.device, precision: str, bounds: list[int],
                 util: Utilisation) -> dict:
    """Ours in a Lightning Trainer (see the module docstring), timed by :func:`step_timer`."""
    import pytorch_lightning as pl

    args, dropped = trainer_args(cfg, device, precision, bounds[-1])
    clock = step_timer(device, bounds, util, "ours")
    trainer = pl.Trainer(**args, callbacks=[clock])
    trainer.fit(module, datamodule=data)
    if clock.end is None:
        raise SystemExit(f"the Trainer stopped after {clock.batches} batches, before step "
                         f"{bounds[-1]}: give fewer --steps / --warmup or more pairs")
    shown = {k: v for k, v in args.items() if k != "logger"}
    return {"seconds": clock.end - clock.start, "steps": bounds[-1] - bounds[0],
            "round_seconds": [b - a for a, b in zip(clock.clock, clock.clock[1:], strict=False)],
            "batches": clock.timed_batches,
            "mean_train_loss": float(torch.stack(clock.losses).float().mean()),
            "trainer_args": shown, "config_trainer_keys_not_passed": dropped,
            "data_loader": loader_settings(clock.loader)}


SETUPS = {
    "out-of-box": "each as a user gets it: ours as rqa train runs the profile (texts tokenised "
                  "once, loader workers, padding to a multiple of 16, the profile's "
                  "trainer.compile); ST eager, tokenising every batch inside its step",
    "matched": "the same advantages on both sides: ST's batches tokenised before the clock, "
               "padded to ours' multiple and pinned, and its transformer compiled with ours' "
               "trainer.compile mode (when ours compiles): what is left is each engine's step",
}


def _matched(st: SentenceTransformers, cfg, pairs, plan) -> dict:
    """The ``matched`` set-up of ST (see :data:`SETUPS`): what it was given."""
    multiple = cfg.data.get("pad_to_multiple_of")
    st.pretokenize(pairs, plan, multiple)
    mode = st.compile(cfg.trainer.compile) if cfg.trainer.compile else None
    return {"st_pretokenized_batches": len(st.tokenized), "st_pad_to_multiple_of": multiple,
            "st_compile": mode}


def _side_figures(name: str, run: dict, tokens: dict, bounds: list[int], batch: int,
                  config, device_name: str | None) -> dict:
    """A side's rounds (steps/s each), its figure (their median) and FLOPs per step."""
    work = [b - a for a, b in zip(bounds, bounds[1:], strict=False)]
    rates = [w / t for w, t in zip(work, run["round_seconds"], strict=True)]
    steps = bounds[-1] - bounds[0]
    flops = training_flops(config, tokens["real"], tokens["real_sq"], batch, steps) / steps
    rate = statistics.median(rates)
    return {"round_steps": work, "round_seconds": run["round_seconds"],
            "round_steps_per_s": rates, "steps_per_s": rate,
            "real_tokens_per_s": tokens["real"] / steps * rate,
            **utilisation(flops, rate, device_name)}


def run_trainer(args, device: torch.device, precision: str) -> dict:
    """ST's plain loop, then ours in a Lightning Trainer (see the module docstring); writes
    and returns the JSON."""
    if args.warmup < 1:
        raise SystemExit("--loop trainer needs --warmup >= 1 (the clock starts at the end of "
                         "the last warm-up step)")
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
    bounds = round_bounds(args.warmup, args.steps, args.rounds)
    ours = Ours(data.tokenizer, mq, ma, chunk_rows, device=device, precision=precision,
                module=module, answer_with_context=cfg.data.answer_with_context)
    st = st_side(args, mq, ma, device, precision)
    config = st.model[0].auto_model.config
    # the Trainer's first epoch draws exactly these (same sampler, seed and epoch 0)
    plans, check = pair_up(ours, st, pairs, first_batches(
        data.train_sampler(), bounds[-1], args.batch_size), args)
    given = _matched(st, cfg, pairs, plans[st.name]) if args.setup == "matched" else {}
    if cfg.trainer.compile:  # what rqa train does with the profile's trainer.compile
        from retrieval_qa.training.compile import compile_encoders

        compile_encoders(module, cfg.trainer.compile, precision)

    with Utilisation(gpu_id(device)) as util:
        st_run = time_st_loop(st, pairs, plans[st.name], bounds, util)
        ours_run = time_trainer(cfg, module, data, device, precision, bounds, util)
    timed = slice(bounds[0], bounds[-1])
    tokens = {side: plan_tokens(ours, pairs, plans[side][timed], rows)
              for side, rows in ((ours.name, chunk_rows), (st.name, None))}
    name = device_info(device, precision, info["cpu"]).get("name") \
        if device.type == "cuda" else None
    sides = {side: _side_figures(side, run, tokens[side], bounds, args.batch_size, config, name)
             for side, run in ((ours.name, ours_run), (st.name, st_run))}
    o, s = sides[ours.name]["steps_per_s"], sides[st.name]["steps_per_s"]
    st_opt = st_optimizer_label(args)
    autocast_note = {"32": "no autocast", "bf16-mixed": "torch.autocast(bfloat16)",
                     "16-mixed": "torch.autocast(float16) + GradScaler"}[precision]
    out = {
        "benchmark": "training throughput, MiniLM dual encoder, in-batch softmax (cosine x20): "
                     "ours in the Lightning Trainer, sentence-transformers in a plain loop",
        "command": args.command,
        "machine": info,
        "device": device_info(device, precision, info["cpu"]),
        "settings": {
            "loop": "trainer", "setup": args.setup, "setup_means": SETUPS[args.setup],
            **given, "experiment": cfg.experiment, "profile": cfg.profile,
            "config_overrides": overrides, "pairs_in_pool": len(pairs),
            "train_pairs": data.describe().get("train"),
            "batch_size": args.batch_size, "timed_steps": args.steps,
            "warmup_steps": args.warmup, "rounds": len(bounds) - 1,
            "max_question_length": mq, "max_answer_length": ma,
            "lr": LR, "weight_decay": WEIGHT_DECAY, "precision": precision,
            "model": st_model_path(args.model), "chunk_rows": chunk_rows,
            "bucket_unit": data.bucket_unit,
            "attention_backends": ("both sides: memory-efficient SDPA "
                                   + ("on" if torch.backends.cuda.mem_efficient_sdp_enabled()
                                      else "off (compiled fp32 on CUDA: see "
                                           "retrieval_qa.training.compile)")),
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
                                          f"{mq} / {ma}"
                                          + (", before the clock" if given else ", each step")
                                          + ") -> .to(device) -> "
                                          "MultipleNegativesRankingLoss(scale 20, cos_sim) "
                                          f"under {autocast_note} -> backward -> torch "
                                          f"{st_opt}; no clipping, schedule or logging",
            "timing": "torch.cuda.synchronize() then perf_counter at the end of the last "
                      "warm-up step and of each round's last step (ours: a Trainer callback); "
                      "nothing waits in between; the sides run one after the other, ST first",
            "flops": FLOPS_FORMULA,
        },
        "first_batch_check": check,
        "sides": sides,
        "figure": "each side's median steps/s over its rounds; the ratio is theirs",
        "ours_steps_per_s": o,
        "sentence_transformers_steps_per_s": s,
        "ours_pairs_per_s": o * args.batch_size,
        "sentence_transformers_pairs_per_s": s * args.batch_size,
        "ratio_ours_over_st": o / s,
        "ratio_per_round": [round(b / a, 4) for a, b in zip(
            ours_run["round_seconds"], st_run["round_seconds"], strict=True)],
        "ratio_real_tokens_per_s": sides[ours.name]["real_tokens_per_s"]
        / sides[st.name]["real_tokens_per_s"],
        "flops": {side: {k: v[k] for k in ("model_tflop_per_step", "achieved_tflops", "mfu")}
                  for side, v in sides.items()},
        "mean_train_loss": {ours.name: ours_run["mean_train_loss"],
                            st.name: st_run["mean_train_loss"]},
        "gpu_utilization": util.report((ours.name, st.name)),
        "goal_ratio": 2.0 if device.type == "cuda" else 1.3,
    }
    write_result(out, args.out, wall)
    _print(out, check, cfg, args, precision, st_opt, device)
    return out


def _print(out: dict, check: dict, cfg, args, precision: str, st_opt: str, device) -> None:
    print_machine(out)
    print_check(check, "eval mode, same weights, fp32")
    dl = out["settings"]["data_loader"]
    print(f"set-up {args.setup}: {out['settings']['setup_means']}")
    print(f"{'side':<34}{'steps/s':>9}{'pairs/s':>10}{'TFLOP/s':>9}{'MFU':>7}   rounds")
    for key, label in (("ours", "ours (Lightning Trainer)"),
                       ("sentence_transformers", f"ST (plain loop, {st_opt})")):
        side = out["sides"][key]
        mfu = "n/a" if side["mfu"] is None else f"{100 * side['mfu']:.1f}%"
        print(f"{label:<34}{side['steps_per_s']:>9.2f}"
              f"{side['steps_per_s'] * args.batch_size:>10.1f}{side['achieved_tflops']:>9.2f}"
              f"{mfu:>7}   {', '.join(f'{r:.2f}' for r in side['round_steps_per_s'])}")
    print(f"ours: num_workers {dl['num_workers']}, pin_memory {dl['pin_memory']}")
    print(f"ratio ours/ST: {out['ratio_ours_over_st']:.3f} steps/s (per round "
          f"{out['ratio_per_round']}), {out['ratio_real_tokens_per_s']:.3f} real tokens/s "
          f"(goal >= {out['goal_ratio']}); {cfg.experiment} profile {cfg.profile}, batches "
          f"{args.batches}, {args.steps} steps of {args.batch_size} after {args.warmup}, "
          f"precision {precision}, wall {out['wall_s']:.0f} s -> {args.out}")
    print_utilisation(out, device)
