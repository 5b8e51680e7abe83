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
writes ``__init__`` and ``training_step``. Its ``build`` reads the token-encoder settings
(``model.towers.encoder``, :class:`EncoderSettings`) before anything is built: the tokenizer
of the data module comes from there, and so does the size of a random token table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, Protocol, TypedDict, runtime_checkable

import pytorch_lightning as pl
from omegaconf import DictConfig, open_dict

from ..errors import UnknownKeyError


@dataclass
class Built:
    """What a method's ``build(cfg)`` returns.

    Attributes:
        module: the LightningModule to train.
        data: its data module.
        notes: extra fields for the run's report (e.g. ``pretrained``, the checkpoint used).
    """

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


class EncoderSettings(TypedDict):
    """``model.towers.encoder`` as a two-tower method's ``build`` reads it (the other keys of
    the section are the towers builder's, retrieval_qa/encoders/builders.py):

    pretrained: the checkpoint (name, alias or folder, :mod:`retrieval_qa.pretrained`) whose
        tokenizer the data module tokenises with, and the towers' weights or word embeddings.
    fallback: the checkpoint that stands in when ``pretrained`` is not found (labelled in
        every output), or null for an error instead.
    embedding_dim: set (with ``vocab_size`` null): a random token table of this width, with a
        row for every id of the tokenizer; null: the checkpoint's own embeddings.
    vocab_size: that table's rows. Left null in configs: ``build`` sets it to the size of the
        tokenizer (:func:`set_vocab_size`), so the saved hyper-parameters and the export
        rebuild the same table; a value given must equal it.
    """

    pretrained: str
    fallback: str | None
    embedding_dim: NotRequired[int | None]
    vocab_size: NotRequired[int | None]


#: the keys of :class:`EncoderSettings` that every two-tower method's config must give
REQUIRED_ENCODER_KEYS = ("pretrained", "fallback")


def encoder_settings(cfg: DictConfig, encoder: DictConfig | None,
                     where: str = "model.towers.encoder") -> DictConfig:
    """``encoder`` (the composed config's :class:`EncoderSettings`), checked for the keys a
    method reads: a missing one is an error naming it and the config file to add it to.

    Args:
        cfg: the composed config (its ``experiment`` names the file in the error's fix).
        encoder: the encoder section (e.g. ``OmegaConf.select(cfg.model, "towers.encoder")``);
            None (or not a DictConfig): an error.
        where: the section's dotted path, for the messages.

    Returns:
        ``encoder`` itself.
    """
    fix = (f"conf/experiment/{cfg.experiment}.yaml (or the conf/model/ file it composes)"
           if cfg.get("experiment") else "the model config")
    if not isinstance(encoder, DictConfig):
        raise UnknownKeyError(f"{where} is missing: the method reads its token-encoder settings "
                              f"there (fix: add {where} with pretrained and fallback to {fix})")
    for key in REQUIRED_ENCODER_KEYS:
        if key not in encoder:
            raise UnknownKeyError(f"{where} has no {key!r}, which the method reads (see "
                                  f"retrieval_qa/models/method.py, EncoderSettings) (fix: add "
                                  f"{key}: ... under {where} in {fix})")
    return encoder


def set_vocab_size(encoder: DictConfig, tokenizer, where: str = "model.towers.encoder") -> None:
    """A random token table (``embedding_dim`` set) gets a row for every id of ``tokenizer``
    (ids 0 to its largest): ``vocab_size`` is set to that in the composed config when null, and
    must equal it when given.

    Args:
        encoder: the encoder section (:class:`EncoderSettings`), changed in place; nothing is
            done when its ``embedding_dim`` is null.
        tokenizer: the data module's tokenizer.
        where: the section's dotted path, for the message.
    """
    if encoder.get("embedding_dim") is None:
        return
    size, given = max(tokenizer.get_vocab().values()) + 1, encoder.get("vocab_size")
    if given is None:
        with open_dict(encoder):
            encoder.vocab_size = size
    elif given != size:
        raise ValueError(f"{where}.vocab_size={given}, but the tokenizer of {where}.pretrained "
                         f"({encoder.pretrained}) gives {size} ids (fix: leave vocab_size null: "
                         "the run sets it from the tokenizer)")
