"""What ``rqa train`` needs from a method (the class that ``model._target_`` names).

A method is a ``pl.LightningModule`` class with:

* ``build(cfg) -> Built`` (classmethod): the module and its data module from the composed
  config (``cfg.model``, ``cfg.data``, ``cfg.eval``, ...), plus notes for the report;
* ``export(folder) -> Path``: writes the inference artefact, a folder whose ``model.json``
  names its loader class in ``_target_`` (read back by :func:`~.artifact.load_artifact`,
  which ``rqa evaluate --checkpoint`` and ``rqa encode`` use for every method);
* ``describe() -> dict``: extra fields for the run's report (e.g. parameter counts);
* after ``trainer.test``: ``test_results``, ``{"metrics": {...}, "questions": n,
  "candidates": n}``.

:class:`~.base.RetrievalModule` implements all of it for two-tower methods; a new one only
writes ``__init__`` and ``training_step``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import pytorch_lightning as pl
from omegaconf import DictConfig


@dataclass
class Built:
    module: pl.LightningModule
    data: pl.LightningDataModule
    notes: dict = field(default_factory=dict)


@runtime_checkable
class Method(Protocol):
    test_results: dict

    @classmethod
    def build(cls, cfg: DictConfig) -> Built: ...

    def export(self, folder: str | Path) -> Path: ...

    def describe(self) -> dict: ...
