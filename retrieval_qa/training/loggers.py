"""Experiment loggers of `rqa train`, one per ``logger`` block (``conf/logger``): the block's
``_target_`` (or its short name, ``name: csv | wandb | none``, retrieval_qa/registry.py) is
called with the block's keys and, when it takes them, ``run_dir`` (the run's folder),
``run_name`` (``EXPERIMENT-PROFILE-seedN``) and ``config`` (the composed config). It returns
what ``pl.Trainer(logger=...)`` takes: a logger, a list of them, or False for none."""

from __future__ import annotations

import os
from pathlib import Path

from omegaconf import DictConfig, OmegaConf


def csv_logger(run_dir: Path):
    """``RUN/logs/version_N/metrics.csv``."""
    from pytorch_lightning.loggers import CSVLogger

    return CSVLogger(save_dir=str(run_dir), name="logs")


def wandb_logger(run_dir: Path, run_name: str, config: DictConfig, project: str, mode: str,
                 group: str | None = None, csv_copy: bool = False):
    """Weights & Biases (``mode``: offline, or online after ``wandb login``); with
    ``csv_copy`` the CSV file as well, so the run folder holds its curves without wandb's
    tools. ``group`` and ``csv_copy`` are absent from conf/logger/csv.yaml, which
    ``logger.name=wandb`` may turn into this logger."""
    from pytorch_lightning.loggers import WandbLogger

    os.environ.setdefault("WANDB_MODE", mode)
    wandb = WandbLogger(project=project, save_dir=str(run_dir), name=run_name, group=group,
                        config=OmegaConf.to_container(config, resolve=True))
    return [wandb, csv_logger(run_dir)] if csv_copy else wandb


def no_logger() -> bool:
    """No experiment logger (``logger.name=none``)."""
    return False
