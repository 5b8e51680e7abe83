"""A cross-attention classifier over the concatenated pair, as a LightningModule: the ENDX
paper's "BERTQA" (Table 6) and the scorer that supervised mining needs.

``[CLS] question [SEP] sentence [SEP]`` goes through a pretrained encoder (any Hugging Face
encoder, :func:`retrieval_qa.pretrained.resolve_pretrained`; offline the packaged MiniLM), a
linear head on the [CLS] state gives one logit, and training minimises binary cross-entropy
on batches of gold pairs and sampled negatives (:mod:`retrieval_qa.classifiers.pair_data`).
Unlike a dual encoder, every (question, candidate) pair needs its own forward pass, so it
scores a few candidates well but cannot index a corpus.

Settings: ``conf/model/cross_classifier.yaml`` (:meth:`CrossAttentionClassifier.from_config`
reads it; the constructor takes its keys). Training with a ``pl.Trainer``:
:func:`retrieval_qa.classifiers.train_classifier.train_cross_classifier`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytorch_lightning as pl
import torch
from torch import nn

from ..config import model_defaults
from ..models.optim import lightning_optimizers
from .pair_data import MODEL_KEYS, encode_pairs

__all__ = ["CrossAttentionClassifier", "length_order"]

#: Keys of conf/model/cross_classifier.yaml that are not constructor arguments.
_NOT_ARGUMENTS = ("_target_", "name")


def length_order(questions: Sequence[str], sentences: Sequence[str]) -> list[int]:
    """The pairs' positions by the characters of question and sentence together: consecutive
    pairs in this order pad a batch little.

    Args:
        questions: each pair's question.
        sentences: each pair's sentence, in the same order.

    Example:

        >>> length_order(["a long question", "short"], ["s", "s"])
        [1, 0]
    """
    return sorted(range(len(questions)), key=lambda i: len(questions[i]) + len(sentences[i]))


class CrossAttentionClassifier(pl.LightningModule):
    """Binary relevance classifier of (question, sentence) pairs (see the module docstring).

    The arguments are the keys of conf/model/cross_classifier.yaml.

    Args:
        pretrained: encoder checkpoint (name, alias or folder).
        fallback: stand-in when ``pretrained`` cannot be found (``"minilm"`` or None).
        dropout: on the [CLS] state, before the head.
        max_length: tokens of question + sentence.
        score_batch_size: pairs per forward pass in :meth:`score_pairs` / :meth:`score`.
        optimizer: ``name``, ``lr``, ``weight_decay``, ``schedule``, warm-up
            (:mod:`retrieval_qa.models.optim`); the schedule spans the Trainer's steps.
        training: how :func:`~retrieval_qa.classifiers.train_classifier.train_cross_classifier`
            trains it (steps, batch_size, same_paragraph, accelerator); kept with the
            hyperparameters so a checkpoint says how it was trained.
    """

    def __init__(self, *, pretrained: str, fallback: str | None, dropout: float,
                 max_length: int, score_batch_size: int, optimizer: Mapping[str, Any],
                 training: Mapping[str, Any]) -> None:
        super().__init__()
        self.save_hyperparameters()
        from ..pretrained import load_model, load_tokenizer, resolve_pretrained

        self.pretrained_checkpoint = resolve_pretrained(str(pretrained), fallback=fallback)
        self.tokenizer = load_tokenizer(self.pretrained_checkpoint)
        # from_pretrained hands the encoder back in eval mode; a new module trains (dropout on)
        self.encoder = load_model(self.pretrained_checkpoint).train()
        self.dropout = nn.Dropout(float(dropout))
        self.head = nn.Linear(int(self.encoder.config.hidden_size), 1)
        self.loss_fn = nn.BCEWithLogitsLoss()
        self.max_length = int(max_length)
        self.score_batch_size = int(score_batch_size)
        self.optimizer_cfg = dict(optimizer)
        self.training_cfg = dict(training)

    @classmethod
    def settings(cls, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The constructor arguments: conf/model/cross_classifier.yaml with ``overrides``
        (``{"pretrained": ..., "optimizer": {"lr": ...}}``; nested sections merge). Unknown
        keys are errors naming the allowed ones."""
        cfg = {k: v for k, v in model_defaults("cross_classifier").items()
               if k not in _NOT_ARGUMENTS}
        for key, value in (overrides or {}).items():
            if key not in cfg:
                raise KeyError(f"unknown cross_classifier setting {key!r}; allowed: {sorted(cfg)}")
            if isinstance(cfg[key], dict):
                unknown = sorted(set(value) - set(cfg[key]))
                if unknown:
                    raise KeyError(f"unknown key(s) {unknown} in cross_classifier.{key}; "
                                   f"allowed: {sorted(cfg[key])}")
                cfg[key] = {**cfg[key], **value}
            else:
                cfg[key] = value
        return cfg

    @classmethod
    def from_config(cls, overrides: Mapping[str, Any] | None = None) -> CrossAttentionClassifier:
        """A classifier with the settings of conf/model/cross_classifier.yaml and
        ``overrides`` (see :meth:`settings`)."""
        return cls(**cls.settings(overrides))

    # ---- the network -------------------------------------------------------------------
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """One logit per pair: ``[B, L]`` token ids of ``[CLS] q [SEP] s [SEP]`` -> ``[B]``."""
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        cls_state = self.encoder(**kwargs).last_hidden_state[:, 0]
        return self.head(self.dropout(cls_state)).squeeze(-1)

    # ---- training ------------------------------------------------------------------------
    def batch_loss(self, logits: torch.Tensor, batch: dict) -> tuple[torch.Tensor, int]:
        """(the loss of a batch's logits, the batch size it is logged with): binary
        cross-entropy over the pairs."""
        return self.loss_fn(logits, batch["labels"].to(logits.dtype)), int(batch["labels"].shape[0])

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        """``batch``: the encoder inputs of the pairs and ``labels`` (1 = gold, 0 = negative)."""
        logits = self(**{k: batch[k] for k in MODEL_KEYS if k in batch})
        loss, size = self.batch_loss(logits, batch)
        self.log("train/loss", loss, batch_size=size)
        self.log("loss", loss, prog_bar=True, logger=False, batch_size=size)
        return loss

    def configure_optimizers(self):
        return lightning_optimizers(self.parameters(), self.optimizer_cfg,
                                    self.trainer.estimated_stepping_batches)

    # ---- scoring ---------------------------------------------------------------------------
    def encode(self, questions: Sequence[str], sentences: Sequence[str]) -> dict[str, torch.Tensor]:
        """The tokenised pairs on the module's device."""
        enc = encode_pairs(self.tokenizer, questions, sentences, self.max_length)
        return {k: v.to(self.device) for k, v in enc.items()}

    @torch.inference_mode()
    def score_pairs(self, questions: Sequence[str], sentences: Sequence[str],
                    batch_size: int | None = None) -> torch.Tensor:
        """Logits of matched pairs (``questions[i]`` with ``sentences[i]``): ``[N]`` floats,
        ``score_batch_size`` pairs per forward pass, the pairs taken in length order (each
        batch padded to its longest: less padding than in the given order). Call ``eval()``
        first for deterministic scores (dropout)."""
        if len(questions) != len(sentences):
            raise ValueError(f"{len(questions)} questions but {len(sentences)} sentences")
        size = int(batch_size or self.score_batch_size)
        order = length_order(questions, sentences)
        parts = [self(**self.encode([questions[i] for i in rows], [sentences[i] for i in rows]
                                    )).float()
                 for rows in (order[lo:lo + size] for lo in range(0, len(order), size))]
        if not parts:
            return torch.empty(0, device=self.device)
        out = torch.empty(len(order), device=self.device)
        out[torch.tensor(order, device=self.device)] = torch.cat(parts)
        return out

    def score(self, questions: str | Sequence[str], candidates: Sequence[str],
              batch_size: int | None = None) -> torch.Tensor:
        """Logits of every candidate for a question (``[C]``) or for each of several questions
        (``[Q, C]``); higher = more likely an answer."""
        candidates = list(candidates)
        if isinstance(questions, str):
            return self.score_pairs([questions] * len(candidates), candidates, batch_size)
        rows = [self.score_pairs([q] * len(candidates), candidates, batch_size)
                for q in questions]
        return torch.stack(rows) if rows else torch.empty(0, len(candidates))

    def predict_proba(self, questions: Sequence[str], sentences: Sequence[str],
                      batch_size: int | None = None) -> torch.Tensor:
        """P(sentence answers question) of matched pairs: the sigmoid of :meth:`score_pairs`."""
        return torch.sigmoid(self.score_pairs(questions, sentences, batch_size))
