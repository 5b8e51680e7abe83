"""The supervised-mining classifier (paper section 4.1) as a method of ``rqa train``:
:class:`~retrieval_qa.classifiers.pair_classifier.CrossAttentionClassifier` (a pretrained encoder,
a linear head on [CLS], binary cross-entropy) over the paper's input
``[CLS] question [SEP] answer [SEP] context [SEP]`` with segment ids (question 0, answer 1,
context ``context_segment``; :func:`~retrieval_qa.mining.examples.encode_triples`),
trained on the examples of :class:`~.classifier_data.MiningClassifierData` (gold pairs and
BM25 / dense / same-document negatives, 1:1:1) and evaluated with torchmetrics: accuracy at
p >= 0.5 and AUC-PR (average precision) on the dev split (model selection,
``val/auc_pr``) and on the test pool's examples (Table 2).

``context_segment: 2`` gives the context a segment of its own: BERT checkpoints have two
segment embeddings, so a third is added, initialised as a copy of segment 1 (the model starts
as if answer and context were one second segment, and can learn to tell them apart).

Settings: ``conf/model/mining_classifier.yaml``. Paper: BERT-base / large, 10 epochs, batch
256, lr 3e-5; offline the packaged all-MiniLM-L6-v2 stands in and every output says so.

The export (:meth:`MiningClassifier.export`) is a folder (``model.json``, ``encoder/`` with
the tokenizer, ``head.pt``) that :meth:`MiningClassifier.load` (and ``rqa mine --classifier``)
reads back; a Lightning ``.ckpt`` of a run works too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch
from omegaconf import DictConfig
from torch import nn

from ..classifiers.pair_classifier import CrossAttentionClassifier
from ..classifiers.pair_data import MODEL_KEYS
from ..models.artifact import check_model_folder, load_weights, refusing_damage
from ..models.method import Built
from ..registry import instantiate
from ..written import atomic_path, read_json, write_text
from .examples import ExampleCollator, encode_triples

__all__ = ["MiningClassifier", "load_classifier"]


class MiningClassifier(CrossAttentionClassifier):
    """See the module docstring; the arguments are the keys of
    conf/model/mining_classifier.yaml.

    Args:
        pretrained: the encoder checkpoint (name, alias or folder).
        fallback: the stand-in when ``pretrained`` cannot be found (``"minilm"`` or None).
        dropout: on the [CLS] state, before the head.
        max_length: tokens of the whole input.
        max_question_length: the question is cut first to this many tokens.
        with_context: read the context too; False: ``[CLS] question [SEP] answer [SEP]``.
        context_segment: the context's segment id (2: a third segment embedding, a copy of
            segment 1; 1: the answer's segment).
        score_batch_size: pairs per forward pass when scoring.
        optimizer: the ``optimizer`` block (:mod:`retrieval_qa.models.optim`).
        pretrained_label: the checkpoint the encoder came from (set by exports); None: the
            resolved checkpoint's label.
        training: unused (rqa train's Trainer settings come from conf/trainer); kept so the
            parent's hyperparameters load back.
    """

    def __init__(self, *, pretrained: str, fallback: str | None, dropout: float,
                 max_length: int, max_question_length: int, with_context: bool,
                 context_segment: int, score_batch_size: int, optimizer: dict,
                 pretrained_label: str | None, training: dict | None = None) -> None:
        # training: unused here (rqa train's Trainer settings come from conf/trainer); kept so
        # the parent's hyperparameters load back
        super().__init__(pretrained=pretrained, fallback=fallback, dropout=dropout,
                         max_length=max_length, score_batch_size=score_batch_size,
                         optimizer=optimizer, training=training or {})
        self.save_hyperparameters()
        from torchmetrics.classification import BinaryAccuracy, BinaryAveragePrecision

        self.max_question_length = int(max_question_length)
        self.with_context = bool(with_context)
        self.context_segment = int(context_segment)
        self.pretrained_label = pretrained_label or self.pretrained_checkpoint.label
        if self.with_context:
            self._segments(self.context_segment + 1)
        self.val_acc, self.val_ap = BinaryAccuracy(), BinaryAveragePrecision()
        self.test_acc, self.test_ap = BinaryAccuracy(), BinaryAveragePrecision()
        self.test_results: dict = {}
        self._test_count = [0, 0]  # examples, positives

    def _segments(self, wanted: int) -> None:
        """At least ``wanted`` segment embeddings (new ones copy the last existing one)."""
        embeddings = getattr(self.encoder, "embeddings", None)
        old = getattr(embeddings, "token_type_embeddings", None)
        if old is None:
            if wanted > 1:
                raise ValueError(f"{self.pretrained_label} has no segment embeddings: use "
                                 "with_context: false or another encoder")
            return
        if old.num_embeddings >= wanted:
            return
        new = nn.Embedding(wanted, old.embedding_dim)
        with torch.no_grad():
            new.weight[:old.num_embeddings] = old.weight
            new.weight[old.num_embeddings:] = old.weight[-1]
        embeddings.token_type_embeddings = new
        self.encoder.config.type_vocab_size = wanted

    # ---- the method contract ---------------------------------------------------------------
    @classmethod
    def build(cls, cfg: DictConfig) -> Built:
        module = instantiate(cfg.model, "model")
        data = instantiate(cfg.data, "data", collator=module.collator())
        checkpoint = module.pretrained_checkpoint
        return Built(module, data, {"pretrained": checkpoint.label,
                                    "pretrained_substituted": checkpoint.substituted})

    def collator(self) -> ExampleCollator:
        return ExampleCollator(self.tokenizer, self.max_length, self.max_question_length,
                               self.with_context, self.context_segment)

    def describe(self) -> dict:
        n = sum(p.numel() for p in self.parameters() if p.requires_grad)
        context = (f" [SEP] context (segment {self.context_segment})" if self.with_context
                   else "")
        return {"trainable_parameters": n, "classifier_pretrained": self.pretrained_label,
                "classifier_input": f"[CLS] question [SEP] answer [SEP]{context}, "
                                    f"{self.max_length} tokens, question <= "
                                    f"{self.max_question_length}"}

    def export(self, folder: str | Path) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.encoder.save_pretrained(folder / "encoder")
        self.tokenizer.save_pretrained(folder / "encoder")
        with atomic_path(folder / "head.pt") as tmp:
            torch.save(self.head.state_dict(), tmp)
        import inspect

        allowed = set(inspect.signature(type(self).__init__).parameters) - {"self"}
        settings = {k: v for k, v in dict(self.hparams).items() if k in allowed}
        settings["pretrained_label"] = self.pretrained_label
        meta = {"_target_": f"{type(self).__module__}.{type(self).__qualname__}",
                "kind": "cross-attention classifier (not a retriever: no encode_questions)",
                "settings": settings}
        write_text(folder / "model.json", json.dumps(meta, indent=2, default=str))  # last
        return folder

    @classmethod
    def load(cls, folder: str | Path, map_location: str = "cpu") -> MiningClassifier:
        """The classifier that :meth:`export` wrote to ``folder``, in eval mode."""
        folder = Path(folder)
        meta = read_json(folder / "model.json", ("settings",))
        check_model_folder(folder / "encoder")  # config, weights, a whole tokenizer
        settings = dict(meta["settings"])
        settings.update(pretrained=str(folder / "encoder"), fallback=None)
        model = cls(**settings)
        model.head.load_state_dict(load_weights(folder / "head.pt", map_location))
        return model.eval()

    # ---- evaluation --------------------------------------------------------------------------
    def _inputs(self, batch: dict) -> dict:
        return {k: batch[k] for k in MODEL_KEYS if k in batch}

    def validation_step(self, batch, batch_idx):
        p = torch.sigmoid(self(**self._inputs(batch)).float())
        labels = batch["labels"].long()
        self.val_acc.update(p, labels)
        self.val_ap.update(p, labels)

    def on_validation_epoch_end(self) -> None:
        self.log_dict({"val/acc": 100 * self.val_acc.compute(),
                       "val/auc_pr": 100 * self.val_ap.compute()}, prog_bar=True)
        self.val_acc.reset()
        self.val_ap.reset()

    def test_step(self, batch, batch_idx):
        p = torch.sigmoid(self(**self._inputs(batch)).float())
        labels = batch["labels"].long()
        self.test_acc.update(p, labels)
        self.test_ap.update(p, labels)
        self._test_count[0] += len(labels)
        self._test_count[1] += int(labels.sum())

    def on_test_epoch_end(self) -> None:
        metrics = {"acc": round(100 * float(self.test_acc.compute()), 2),
                   "auc_pr": round(100 * float(self.test_ap.compute()), 2)}
        self.log_dict({f"test/{k}": v for k, v in metrics.items()})
        self.test_results = {"metrics": metrics, "examples": self._test_count[0],
                             "positives": self._test_count[1], "threshold": 0.5,
                             "classifier": self.pretrained_label}
        self.test_acc.reset()
        self.test_ap.reset()
        self._test_count = [0, 0]

    # ---- scoring (the miner's scorer) -------------------------------------------------------
    def encode_triples(self, questions: Sequence[str], answers: Sequence[str],
                       contexts: Sequence[str] | None) -> dict[str, torch.Tensor]:
        enc = encode_triples(self.tokenizer, questions, answers,
                             contexts if self.with_context else None, self.max_length,
                             self.max_question_length, self.context_segment)
        return {k: v.to(self.device) for k, v in enc.items()}

    @torch.inference_mode()
    def probabilities(self, questions: Sequence[str], answers: Sequence[str],
                      contexts: Sequence[str] | None = None, batch_size: int | None = None
                      ) -> torch.Tensor:
        """P(answer answers question) of matched triples: ``[N]`` float32 on the CPU, in the
        order given. The triples are tokenised at once, then run longest first in batches of
        ``batch_size`` (default ``score_batch_size``), each cut to its own longest row (little
        padding, as the dual encoders' encoding does). Call ``eval()`` first (dropout)."""
        if self.with_context and contexts is None:
            raise ValueError("this classifier reads the context: pass contexts")
        if not len(questions):
            return torch.empty(0)
        size = int(batch_size or self.score_batch_size)
        enc = encode_triples(self.tokenizer, questions, answers,
                             contexts if self.with_context else None, self.max_length,
                             self.max_question_length, self.context_segment)
        lengths = enc["attention_mask"].sum(dim=1)
        order = torch.argsort(lengths, descending=True, stable=True)
        out = torch.empty(len(questions))
        for lo in range(0, len(order), size):
            rows = order[lo:lo + size]
            width = int(lengths[rows].max())
            batch = {k: v[rows, :width].to(self.device) for k, v in enc.items()}
            out[rows] = torch.sigmoid(self(**batch).float()).cpu()
        return out


def load_classifier(path: str | Path, map_location: str = "cpu") -> MiningClassifier:
    """A classifier from an export folder (``model.json``) or a Lightning ``.ckpt`` of
    ``rqa train experiment=mining_classifier``, in eval mode.

    Args:
        path: the export folder or the ``.ckpt`` file.
        map_location: the device to load onto.

    Example:

        >>> classifier = load_classifier("runs/mining_classifier/model")  # doctest: +SKIP
    """
    path = Path(path)
    if path.is_dir():
        if not (path / "model.json").is_file():
            raise FileNotFoundError(f"{path} holds no model.json: pass the `checkpoint` folder "
                                    "that `rqa train experiment=mining_classifier` printed, or "
                                    "a .ckpt file of that run")
        with refusing_damage():
            return MiningClassifier.load(path, map_location)
    if path.suffix == ".ckpt" and path.is_file():
        return MiningClassifier.load_from_checkpoint(path, map_location=map_location).eval()
    raise FileNotFoundError(f"--classifier {path}: neither an export folder nor a .ckpt file")
