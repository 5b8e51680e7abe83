"""Train the concatenated-pair classifier
(:class:`~retrieval_qa.models.cross_classifier.CrossAttentionClassifier`) with a
``pl.Trainer`` on gold pairs and sampled negatives of a pool
(:class:`~retrieval_qa.data.classifier_pairs.ClassifierPairDataModule`): ``training.steps``
optimiser steps of ``training.batch_size`` pairs, the schedule of ``optimizer`` over them.
Settings: conf/model/cross_classifier.yaml, with overrides."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Mapping
from typing import Any

import pytorch_lightning as pl
import torch

from ..data.classifier_pairs import ClassifierPairDataModule
from ..data.types import RetrievalPool
from ..models.cross_classifier import CrossAttentionClassifier

__all__ = ["LossRecorder", "negatives_note", "train_cross_classifier"]



def negatives_note(same_paragraph: float) -> str:
    """How the negatives are drawn, in words (the training info's ``negatives``)."""
    share = ("equal chance" if same_paragraph == 0.5
             else f"chance {same_paragraph} for the gold sentence's paragraph")
    return (f"1:1; each from the gold sentence's paragraph or a random paragraph ({share}), "
            "never a gold sentence")


class LossRecorder(pl.Callback):
    """Keeps every step's training loss; prints the mean of the last ``every`` steps to stderr
    every ``every`` steps (0: never)."""

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


def train_cross_classifier(train_pool: RetrievalPool, overrides: Mapping[str, Any] | None = None,
                           *, seed: int = 0, log_every: int = 50, label: str = "classifier"
                           ) -> tuple[CrossAttentionClassifier, dict]:
    """Fine-tune a classifier on ``train_pool``; ``(model in eval mode, training info)``. The
    Trainer hands the model back on the CPU, wherever it trained. ``overrides``: settings over
    conf/model/cross_classifier.yaml (see :meth:`CrossAttentionClassifier.settings`).
    ``seed`` seeds the weights of the head, dropout and the pair sampler."""
    settings = CrossAttentionClassifier.settings(overrides)
    train = settings["training"]
    steps, batch_size = int(train["steps"]), int(train["batch_size"])
    torch.manual_seed(seed)
    model = CrossAttentionClassifier(**settings)
    data = ClassifierPairDataModule(train_pool, model.tokenizer, batch_size=batch_size,
                                    steps=steps, max_length=model.max_length, seed=seed,
                                    same_paragraph=float(train["same_paragraph"]))
    recorder = LossRecorder(steps, log_every, label)
    trainer = pl.Trainer(max_steps=steps, max_epochs=-1, accelerator=train["accelerator"],
                         devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0, callbacks=[recorder])
    start = time.perf_counter()
    trainer.fit(model, datamodule=data)
    seconds = time.perf_counter() - start
    model.eval()
    losses = recorder.losses
    checkpoint = model.pretrained_checkpoint
    info = {"pretrained": checkpoint.label, "pretrained_substituted": checkpoint.substituted,
            "steps": steps, "batch_size": batch_size, "lr": float(settings["optimizer"]["lr"]),
            "max_length": model.max_length, "seed": seed,
            "train_pool": f"{train_pool.dataset}/{train_pool.pool}",
            "train_pairs_available": len(train_pool.pairs),
            "negatives": negatives_note(float(train["same_paragraph"])),
            "first_loss": round(losses[0], 4) if losses else None,
            "last_loss": round(statistics.fmean(losses[-10:]), 4) if losses else None,
            "train_seconds": round(seconds, 2)}
    return model, info
