"""The one way a training builds its ``pl.Trainer``: the five methods of ``rqa train``
(:mod:`.run`), BERTQA and the cross-encoder reranker (:mod:`retrieval_qa.classifiers`). One
rule each for:

- precision: ``trainer.precision``; ``auto`` is bf16-mixed on a GPU that supports bf16, else
  32 (the losses keep their float32 arithmetic under autocast:
  :mod:`retrieval_qa.losses.precision`);
- threads: the command's ``threads`` setting, applied by
  :func:`retrieval_qa.runtime.apply_threads` when the command starts, before any data or model
  is built; the Trainer never changes them;
- logging: the ``logger`` block (conf/logger: csv, wandb or none; a config without one logs
  nothing), the model summary only through the ``trainer.callbacks.model_summary`` block, and
  three lines of third-party noise silenced (:func:`silence_third_party_noise`);
- checkpoints: the callbacks of ``trainer.callbacks`` in the run's ``checkpoints/`` folder
  (:mod:`.callbacks`): the resumable ``last.ckpt`` at every validation and epoch end, on a
  clock and on SIGTERM/SIGINT, and, where something is validated, the weights of the best
  validations; Lightning adds no checkpoint of its own.

The Trainer's settings are a ``trainer`` block of the ``trainer`` group:
conf/trainer/default.yaml for ``rqa train``, conf/trainer/classifier.yaml (the same rules
without validation) for the trainings of :mod:`retrieval_qa.classifiers`
(:func:`trainer_config`)."""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from omegaconf import DictConfig, OmegaConf

from ..config import trainer_settings
from ..registry import instantiate
from .progress_bar import on_gpu
from .resumable_checkpoints import ResumableCheckpoints

# keys of conf/trainer that configure this builder (callbacks, compile); every other key is a
# pl.Trainer argument, passed through as is (``precision: auto`` resolved first)
RUNNER_KEYS = ("monitor", "save_top_k", "checkpoint_every_n_steps", "checkpoint_every_minutes",
               "weights_every_minutes", "progress_refresh_steps", "divergence_window",
               "divergence_factor", "divergence_patience", "compile", "callbacks")

#: Lightning's advertisement that every training printed (dropped by its text, nothing else
#: of Lightning's log)
NOISE_LINE = re.compile(r"💡 Tip: For seamless cloud logging and experiment tracking, try "
                        r"installing \[litlogger\]")
#: torch's deprecation of the ``LeafSpec`` that Lightning's own ``_pytree`` helpers use
NOISE_WARNING = r"`isinstance\(treespec, LeafSpec\)` is deprecated"


class _DropTip(logging.Filter):
    """Drops the records whose message is :data:`NOISE_LINE`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not NOISE_LINE.match(record.getMessage())


def silence_third_party_noise() -> None:
    """Silence, by their exact text, Lightning's litlogger tip (one line of its rank-zero log)
    and torch's FutureWarning on ``LeafSpec`` raised inside Lightning; every other warning and
    log line stays. The "model summary callbacks" notice is not printed at all: the Trainer is
    built with ``enable_model_summary=False`` and the summary comes from its callback block.
    Idempotent."""
    warnings.filterwarnings("ignore", message=NOISE_WARNING, category=FutureWarning)
    from lightning_fabric.utilities.rank_zero import rank_zero_module

    log = rank_zero_module.log  # the logger behind rank_zero_info, whoever set it
    if not any(isinstance(f, _DropTip) for f in log.filters):
        log.addFilter(_DropTip())


def resolve_precision(trainer_cfg: Mapping[str, Any]) -> str:
    """``precision: auto``: bf16-mixed on a GPU that supports bf16, else 32.

    Args:
        trainer_cfg: the ``trainer`` block (its ``precision``, ``accelerator``).
    """
    precision = str(trainer_cfg["precision"])
    if precision != "auto":
        return precision
    return "bf16-mixed" if on_gpu(trainer_cfg["accelerator"]) and torch.cuda.is_bf16_supported() \
        else "32"


def build_logger(cfg: DictConfig, run_dir: Path):
    """The ``logger`` block's logger (:mod:`.loggers`; conf/logger: csv, wandb or none).

    Args:
        cfg: the composed run config.
        run_dir: the run folder.
    """
    return instantiate(cfg.logger, "logger", "logger", run_dir=run_dir,
                       run_name=f"{cfg.experiment}-{cfg.profile}-seed{cfg.seed}", config=cfg)


def build_callbacks(cfg: DictConfig, run_dir: Path | None) -> list[pl.Callback]:
    """One callback per block of ``trainer.callbacks``, in order (:mod:`.callbacks`: best
    checkpoints, the resumable ``last.ckpt``, validation at the last step of a run that
    ``max_steps`` ends inside the first epoch, model summary and progress bar on stderr).

    Args:
        cfg: the composed run config.
        run_dir: the run folder (checkpoints go to ``run_dir/checkpoints``); None: no block that
            writes checkpoints may be on.
    """
    dirpath = None if run_dir is None else Path(run_dir) / "checkpoints"
    built = (instantiate(block, f"trainer.callbacks.{name}", dirpath=dirpath)
             for name, block in cfg.trainer.callbacks.items() if block is not None)
    return [callback for callback in built if callback is not None]


def trainer_config(name: str, **settings) -> DictConfig:
    """``{"trainer": conf/trainer/<name>.yaml}`` with ``settings`` (its keys, or other
    ``pl.Trainer`` arguments such as ``max_time``) over it: the config of a training outside
    ``rqa train`` for :func:`build_trainer`.

    Args:
        name: the file of conf/trainer.
        **settings: its keys, or other ``pl.Trainer`` arguments such as ``max_time``.
    """
    cfg = OmegaConf.create({"trainer": trainer_settings(name)})
    for key, value in settings.items():
        OmegaConf.update(cfg, f"trainer.{key}", value, force_add=True)
    return cfg


def build_trainer(cfg: DictConfig, run_dir: Path | None,
                  callbacks: Sequence[pl.Callback] = ()) -> pl.Trainer:
    """The Trainer of ``cfg.trainer`` (see the module docstring) with ``callbacks``,
    those of ``cfg.trainer.callbacks`` and the logger of ``cfg.logger`` (none without that
    block).

    Args:
        cfg: the config (its ``trainer`` and ``logger`` blocks).
        run_dir: the run's folder (its ``checkpoints/``, logs); None: a training that keeps no
            files.
        callbacks: a training's own (e.g. a loss recorder), placed before the checkpoints,
            which save their state.
    """
    silence_third_party_noise()
    t = OmegaConf.to_container(cfg.trainer, resolve=True)
    args = {k: v for k, v in t.items() if k not in RUNNER_KEYS}
    args["precision"] = resolve_precision(t)
    callbacks = [*callbacks, *build_callbacks(cfg, run_dir)]
    # the checkpoint callbacks run after the others (Lightning's order); the resumable
    # last.ckpt is written after the best checkpoints, so it holds their choice
    callbacks.sort(key=lambda c: isinstance(c, ResumableCheckpoints))
    logger = build_logger(cfg, run_dir) if "logger" in cfg and run_dir is not None else False
    return pl.Trainer(
        **args, callbacks=callbacks, logger=logger,
        enable_checkpointing=any(isinstance(c, pl.callbacks.Checkpoint) for c in callbacks),
        enable_model_summary=False,  # the summary is the model_summary block's, or none
        default_root_dir=None if run_dir is None else str(run_dir),
        use_distributed_sampler=False,  # the data modules' samplers shard their batches
    )


def fit(trainer: pl.Trainer, module: pl.LightningModule, ckpt_path: str | Path | None = None,
        **data) -> None:
    """``trainer.fit(module, ckpt_path=..., **data)`` with the signal handlers of the
    Trainer's :class:`~.resumable_checkpoints.ResumableCheckpoints` from the start (a signal
    before the first step stops at that step): a signal stops the fit with
    :class:`~retrieval_qa.errors.RunInterrupted` once ``last.ckpt`` is saved. Without that
    callback, a plain fit.

    Args:
        trainer: the Trainer.
        module: the LightningModule.
        ckpt_path: the checkpoint to resume from; None: the start.
        **data: the data (``datamodule=`` or the loaders), passed to ``trainer.fit``.
    """
    stopper = next((c for c in trainer.callbacks if isinstance(c, ResumableCheckpoints)), None)
    if stopper is None:
        trainer.fit(module, ckpt_path=ckpt_path, **data)
        return
    stopper.install_handlers()
    try:
        trainer.fit(module, ckpt_path=ckpt_path, **data)
        stopper.check(trainer)
    finally:
        stopper.restore_handlers()
