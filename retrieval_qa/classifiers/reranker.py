"""A cross-encoder reranker as a LightningModule, exportable as a sentence-transformers
``CrossEncoder`` folder.

It starts from the cross-attention classifier
(:class:`~retrieval_qa.classifiers.pair_classifier.CrossAttentionClassifier`: the same
``[CLS] question [SEP] sentence [SEP]`` input, settings, binary cross-entropy training step
and scoring methods); the network is the Hugging Face sequence-classification model of the
same encoder with one label (for BERT-family encoders: the pooler on [CLS], dropout, a linear
head), so that :meth:`export` is a folder ``CrossEncoder(path)`` loads offline and scores
exactly as this module does (raw logits: the export's activation is the identity).

Settings: ``conf/model/cross_classifier.yaml`` (the parent's keys) and ``reads``: what it reads
for a candidate, its sentence alone (the default) or its sentence and then its paragraph
(:mod:`retrieval_qa.classifiers.candidate_text`); training:
:mod:`retrieval_qa.classifiers.train_reranker`.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch

from ..written import Damaged, read_json, refuse, write_text
from .candidate_text import candidate_text, check_reads
from .pair_classifier import CrossAttentionClassifier

__all__ = ["CrossEncoderReranker"]

META_FILE = "rqa_reranker.json"


class CrossEncoderReranker(CrossAttentionClassifier):
    """See the module docstring.

    Args:
        reads: what it reads for a candidate: ``sentence`` (the sentence alone) or
            ``sentence_and_paragraph`` (:mod:`~retrieval_qa.classifiers.candidate_text`).
        settings: the parent's keyword arguments (conf/model/cross_classifier.yaml); its
            ``dropout`` is the sequence-classification head's ``classifier_dropout``.

    Example:

        >>> reranker = CrossEncoderReranker.from_config({"reads": "sentence"})  # doctest: +SKIP
    """

    def __init__(self, *, reads: str = "sentence", **settings) -> None:
        super().__init__(**settings)
        self.reads = check_reads(reads)  # among the hparams (Lightning collects this frame's)
        from transformers import AutoModelForSequenceClassification

        resolved = self.pretrained_checkpoint
        # the sequence-classification model of the same checkpoint; its base model replaces
        # the parent's encoder, its pooler + head the parent's linear head
        self.network = AutoModelForSequenceClassification.from_pretrained(
            resolved.path_or_name, num_labels=1, classifier_dropout=float(settings["dropout"]),
            local_files_only=resolved.local).train()
        self.encoder = self.network.base_model
        del self.head
        del self.dropout

    @classmethod
    def settings(cls, overrides=None) -> dict:
        """The parent's settings with ``reads`` (default ``sentence``) among the overrides."""
        overrides = dict(overrides or {})
        reads = check_reads(overrides.pop("reads", "sentence"))
        return {**super().settings(overrides), "reads": reads}

    def candidate_text(self, sentence: str, paragraph: str) -> str:
        """What this reranker reads for ``sentence`` of ``paragraph`` (its ``reads``)."""
        return candidate_text(sentence, paragraph, self.reads, self.tokenizer.sep_token or "|")

    def batch_loss(self, logits: torch.Tensor, batch: dict) -> tuple[torch.Tensor, int]:
        """Pairs with ``labels`` (the parent's binary cross-entropy), or with ``group`` too:
        each question's candidates compete in a softmax
        (:func:`~retrieval_qa.losses.listwise.grouped_softmax_loss`), logged per group."""
        if "group" not in batch:
            return super().batch_loss(logits, batch)
        from ..losses.listwise import grouped_softmax_loss

        loss = grouped_softmax_loss(logits, batch["group"], batch["labels"])
        return loss, int(batch["group"].max()) + 1

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        return self.network(**kwargs).logits.squeeze(-1)

    def export(self, folder: str | Path) -> Path:
        """A sentence-transformers CrossEncoder folder (``CrossEncoder(folder)`` loads it
        offline; its ``predict`` gives this module's logits), plus ``rqa_reranker.json``
        with this module's settings."""
        from sentence_transformers import CrossEncoder

        folder = Path(folder)
        with tempfile.TemporaryDirectory(prefix="rqa-ce-") as tmp:
            self.network.save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)
            ce = CrossEncoder(tmp, local_files_only=True, max_length=self.max_length,
                              activation_fn=torch.nn.Identity(), device="cpu")
            ce.save(str(folder))
        settings = {k: v for k, v in dict(self.hparams).items()}
        settings["pretrained_label"] = self.pretrained_checkpoint.label
        write_text(folder / META_FILE, json.dumps(
            {"kind": "cross-encoder reranker (sentence-transformers CrossEncoder folder)",
             "settings": settings}, indent=2, default=str))
        return folder

    @classmethod
    def load(cls, folder: str | Path, map_location: str = "cpu") -> CrossEncoderReranker:
        """The reranker that :meth:`export` wrote, in eval mode."""
        folder = Path(folder)
        meta = folder / META_FILE
        if not meta.is_file():
            raise FileNotFoundError(f"{folder} holds no {META_FILE}: pass a folder written by "
                                    "CrossEncoderReranker.export (python -m "
                                    "retrieval_qa.classifiers.train_reranker --output)")
        from ..models.artifact import check_model_folder

        try:
            settings = dict(read_json(meta, ("settings",))["settings"])
            check_model_folder(folder)  # config, weights, a whole tokenizer
        except Damaged as damage:
            raise refuse(damage, "reranker file", "train and export the reranker again (python "
                         "-m retrieval_qa.classifiers.train_reranker --output)") from None
        settings.pop("pretrained_label", None)
        settings.update(pretrained=str(folder), fallback=None)
        return cls(**settings).to(map_location).eval()
