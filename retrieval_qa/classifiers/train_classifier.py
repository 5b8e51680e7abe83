"""Train the concatenated-pair classifier
(:class:`~retrieval_qa.classifiers.pair_classifier.CrossAttentionClassifier`) with the
Trainer of :func:`~retrieval_qa.training.trainer.build_trainer` (conf/trainer/classifier.yaml)
on gold pairs and sampled negatives of a pool
(:class:`~retrieval_qa.classifiers.pair_data.ClassifierPairDataModule`): ``training.steps``
optimiser steps of ``training.batch_size`` pairs, the schedule of ``optimizer`` over them.
Settings: conf/model/cross_classifier.yaml, with overrides. Given a folder, the training keeps
its resumable checkpoints there and the same call resumes from them, to the weights of an
uninterrupted training."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from omegaconf import OmegaConf

from ..data.types import RetrievalPool
from ..runtime import machine_info
from ..training.budgets import StepBudget, TimeBudget
from ..training.run_folder import resume_point
from ..training.trainer import build_trainer, fit, trainer_config
from .pair_classifier import CrossAttentionClassifier
from .pair_data import ClassifierPairDataModule

__all__ = ["LossRecorder", "negatives_note", "train_cross_classifier"]


def negatives_note(same_paragraph: float) -> str:
    """How the negatives are drawn, in words (the training info's ``negatives``).

    Args:
        same_paragraph: the chance of a same-paragraph negative (``training.same_paragraph``).

    Example:

        >>> "(chance 0.25 for the gold sentence's paragraph)" in negatives_note(0.25)
        True
    """
    share = ("equal chance" if same_paragraph == 0.5
             else f"chance {same_paragraph} for the gold sentence's paragraph")
    return (f"1:1; each from the gold sentence's paragraph or a random paragraph ({share}), "
            "never a gold sentence")


class LossRecorder(pl.Callback):
    """Keeps every step's training loss (in the checkpoints too: a resumed training reports
    all of them); prints the mean of the last ``every`` steps to stderr every ``every`` steps.

    Args:
        total: the training's steps (printed as ``step n/total``).
        every: the steps between printed means; 0: never print.
        label: what the printed lines begin with.
    """

    def __init__(self, total: int, every: int = 50, label: str = "classifier") -> None:
        self.losses: list[float] = []
        self.total, self.every, self.label = total, every, label

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        loss = outputs["loss"] if isinstance(outputs, Mapping) else outputs
        self.losses.append(float(loss))
        n = len(self.losses)
        if self.every and n % self.every == 0:
            print(f"{self.label} step {n}/{self.total} loss "
                  f"{statistics.fmean(self.losses[-self.every:]):.4f}", file=sys.stderr,
                  flush=True)

    def curve(self, every: int = 25) -> dict:
        """The mean loss of each ``every`` steps (the last may be fewer), for a report: where
        two trainings of the same settings part."""
        return {"every_steps": every,
                "means": [round(statistics.fmean(self.losses[i:i + every]), 4)
                          for i in range(0, len(self.losses), every)]}

    def state_dict(self) -> dict:
        return {"losses": list(self.losses)}

    def load_state_dict(self, state_dict: dict) -> None:
        self.losses = [float(x) for x in state_dict["losses"]]


def resumable_training(run_dir: str | Path | None, settings: Mapping[str, Any], resume: str,
                       fix: str) -> Path | None:
    """The checkpoint to resume from in ``run_dir/checkpoints`` (None: start; see
    :func:`~retrieval_qa.training.run_folder.resume_point`), its notes printed to stderr; a
    training without ``run_dir`` keeps nothing and starts.

    Args:
        run_dir: the training's folder; None: no checkpoints.
        settings: what the checkpoints belong to (written to ``checkpoints/config.yaml``;
            other settings there are refused).
        resume: ``auto`` (the newest whole checkpoint of the same settings) or ``never``
            (the folder's checkpoints are removed first).
        fix: what the refusal of other settings tells the user to do.
    """
    if run_dir is None:
        return None
    checkpoint, notes = resume_point(Path(run_dir) / "checkpoints",
                                     OmegaConf.create(dict(settings)), resume, fix)
    for note in notes:
        print(f"  {note}", file=sys.stderr, flush=True)
    return checkpoint


def classifier_trainer(run_dir: str | Path | None, recorder: LossRecorder,
                       max_minutes: float | None = None, stop_after_steps: int | None = None,
                       **settings) -> pl.Trainer:
    """The Trainer of conf/trainer/classifier.yaml with ``settings`` over it and
    ``recorder``; without ``run_dir`` no checkpoint is written. ``max_minutes``: the training
    stops after that long, ``stop_after_steps``: after that step of its schedule, each with a
    checkpoint from which it resumes exactly
    (:mod:`retrieval_qa.training.budgets`).

    Args:
        run_dir: the training's folder; None: no checkpoint is written.
        recorder: the :class:`LossRecorder` callback.
        max_minutes: stop after that many minutes; None: no time budget.
        stop_after_steps: stop after that step; None: no step budget.
        settings: ``pl.Trainer`` settings over conf/trainer/classifier.yaml (e.g.
            ``max_steps``, ``accelerator``).
    """
    cfg = trainer_config("classifier", **settings)
    if run_dir is None:
        cfg.trainer.callbacks.resumable_checkpoints = None
    callbacks = [recorder, *([TimeBudget(max_minutes)] if max_minutes else []),
                 *([StepBudget(stop_after_steps)] if stop_after_steps else [])]
    return build_trainer(cfg, None if run_dir is None else Path(run_dir), callbacks=callbacks)


def train_cross_classifier(train_pool: RetrievalPool, overrides: Mapping[str, Any] | None = None,
                           *, seed: int = 0, log_every: int = 50, label: str = "classifier",
                           run_dir: str | Path | None = None
                           ) -> tuple[CrossAttentionClassifier, dict]:
    """Fine-tune a classifier on ``train_pool``; ``(model in eval mode, training info)``. The
    Trainer hands the model back on the CPU, wherever it trained. ``overrides``: settings over
    conf/model/cross_classifier.yaml (see :meth:`CrossAttentionClassifier.settings`).
    Args:
        train_pool: the pool trained on.
        overrides: settings over conf/model/cross_classifier.yaml (see
            :meth:`CrossAttentionClassifier.settings`); None: none.
        seed: seeds the weights of the head, dropout and the pair sampler.
        log_every: the steps between the losses printed to stderr (0: never).
        label: what the printed lines begin with.
        run_dir: where the training keeps its checkpoints (``checkpoints/``, with the
            settings they belong to): the same call resumes from them; other settings there
            are refused. None: nothing kept.

    Example::

        model, info = train_cross_classifier(pool, {"training": {"steps": 100}}, seed=1,
                                             run_dir="runs/analysis/bertqa")
        model.score("who wrote it?", ["a sentence", "another"])
    """
    settings = CrossAttentionClassifier.settings(overrides)
    train = settings["training"]
    steps, batch_size = int(train["steps"]), int(train["batch_size"])
    checkpoint = resumable_training(
        run_dir, {"classifier": settings, "seed": seed,
                  "train_pool": f"{train_pool.dataset}/{train_pool.pool}",
                  "train_pairs": len(train_pool.pairs)}, "auto",
        f"another run_dir for these settings (rqa analyze bertqa: --output-dir), or remove "
        f"{run_dir}/checkpoints to train them there")
    torch.manual_seed(seed)
    model = CrossAttentionClassifier(**settings)
    data = ClassifierPairDataModule(train_pool, model.tokenizer, batch_size=batch_size,
                                    steps=steps, max_length=model.max_length, seed=seed,
                                    same_paragraph=float(train["same_paragraph"]))
    recorder = LossRecorder(steps, log_every, label)
    trainer = classifier_trainer(run_dir, recorder, max_steps=steps, max_epochs=-1,
                                 accelerator=train["accelerator"])
    start = time.perf_counter()
    fit(trainer, model, checkpoint, datamodule=data)
    seconds = time.perf_counter() - start
    model.eval()
    losses = recorder.losses
    pretrained = model.pretrained_checkpoint
    info = {"pretrained": pretrained.label, "pretrained_substituted": pretrained.substituted,
            "steps": steps, "batch_size": batch_size, "lr": float(settings["optimizer"]["lr"]),
            "max_length": model.max_length, "seed": seed,
            "train_pool": f"{train_pool.dataset}/{train_pool.pool}",
            "train_pairs_available": len(train_pool.pairs),
            "negatives": negatives_note(float(train["same_paragraph"])),
            "first_loss": round(losses[0], 4) if losses else None,
            "last_loss": round(statistics.fmean(losses[-10:]), 4) if losses else None,
            "loss_curve": recorder.curve(),
            "machine": machine_info(torch.get_num_threads(), ("transformers",)),
            "train_seconds": round(seconds, 2),
            "resumed_from": None if checkpoint is None else str(checkpoint)}
    return model, info
