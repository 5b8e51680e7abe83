"""The one Trainer builder (retrieval_qa/training/trainer.py): a progress bar whose total is
the steps that will run, exactly the three lines of third-party noise silenced (nothing else),
and the checkpoint callbacks it orders and switches on."""

from __future__ import annotations

import logging
import re
import warnings
from types import SimpleNamespace

import pytorch_lightning as pl
from helpers import tiny

from retrieval_qa.training.progress_bar import batches_to_run
from retrieval_qa.training.resumable_checkpoints import ResumableCheckpoints
from retrieval_qa.training.run import train
from retrieval_qa.training.trainer import build_trainer, trainer_config


def _trainer(batches, max_steps, global_step=0, accumulate=1):
    return SimpleNamespace(num_training_batches=batches, max_steps=max_steps,
                           global_step=global_step, accumulate_grad_batches=accumulate)


def test_batches_to_run_are_the_epochs_or_what_max_steps_leaves_of_it():
    assert batches_to_run(_trainer(312, 20), 0) == 20
    assert batches_to_run(_trainer(312, -1), 0) == 312
    assert batches_to_run(_trainer(312, 400), 0) == 312  # the epoch ends first
    assert batches_to_run(_trainer(312, 20, global_step=5), 5) == 20  # resumed at step 5
    assert batches_to_run(_trainer(312, 320, global_step=312), 0) == 8  # epoch 2's 8 steps
    assert batches_to_run(_trainer(312, 20, accumulate=2), 0) == 40  # batches, not steps
    assert batches_to_run(_trainer(float("inf"), 6), 0) == 6  # a stream of unknown length
    assert batches_to_run(_trainer(float("inf"), -1), 0) == float("inf")


def test_the_progress_bar_of_a_run_that_max_steps_cuts_counts_its_steps(
        setup_dirs, tmp_path, capsys):
    report = train(tiny(setup_dirs, tmp_path, "test_after_fit=false", "trainer.max_steps=3",
                        "trainer.enable_progress_bar=true"))
    assert report["global_steps"] == 3
    updates = [u for u in re.split(r"[\r\n]", capsys.readouterr().err) if u.startswith("Epoch")]
    totals = {int(m.group(1)) for u in updates if (m := re.search(r"\d+/(\d+) \[", u))}
    assert totals == {3}, updates  # not the epoch's batches
    assert any(re.search(r"\b3/3 \[", u) for u in updates)


def test_the_third_party_noise_is_silenced_and_nothing_else(setup_dirs, tmp_path, caplog):
    with warnings.catch_warnings(record=True) as seen, caplog.at_level(logging.INFO):
        warnings.simplefilter("always")
        train(tiny(setup_dirs, tmp_path, "test_after_fit=false", "trainer.max_steps=2"))
        warnings.warn("another FutureWarning", FutureWarning, stacklevel=1)
    lines = [r.getMessage() for r in caplog.records]
    assert not [m for m in lines if "litlogger" in m or "model summary callbacks" in m
                or "`weights_only` was not set" in m]  # nor a line of our checkpoint writes
    assert any("Trainable params" in m for m in lines)  # the model summary block's table
    assert any("GPU available" in m for m in lines)  # Lightning's other lines stay
    assert not [w for w in seen if "LeafSpec" in str(w.message)]
    assert [str(w.message) for w in seen if w.category is FutureWarning] \
        == ["another FutureWarning"]  # no blanket filter


def test_the_resumable_checkpoints_run_after_the_best_ones_and_lightning_adds_none(tmp_path):
    cfg = trainer_config("default", accelerator="cpu", monitor="val/r@1", max_epochs=1)
    cfg.trainer.callbacks = {"resumable_checkpoints": cfg.trainer.callbacks.resumable_checkpoints,
                             "best_checkpoint": cfg.trainer.callbacks.best_checkpoint}
    trainer = build_trainer(cfg, tmp_path)
    kinds = [type(c) for c in trainer.checkpoint_callbacks]
    assert kinds == [pl.callbacks.ModelCheckpoint, ResumableCheckpoints]  # whatever the order
    best = trainer.checkpoint_callbacks[0]
    assert best.save_weights_only and not best.save_last
    cfg = trainer_config("classifier", accelerator="cpu", max_steps=3)
    cfg.trainer.callbacks.resumable_checkpoints = None
    bare = build_trainer(cfg, None)  # no checkpoint at all: Lightning adds none of its own
    assert bare.checkpoint_callbacks == []
    assert trainer.precision == bare.precision == "32-true"  # precision auto on a CPU
