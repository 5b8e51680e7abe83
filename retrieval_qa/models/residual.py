"""Residual refinement of frozen embeddings (residual-embedding paper, 3.2, 4.3) as a
LightningModule: a refiner (FCRR, ConvRR or both) on the question side, the paragraph side,
or both (``sides``), trained with the batch-hard triplet loss (or the quadratic regression
conditional loss) on (question, its paragraph) vectors; validation and test rank every
paragraph for every question (recall@k; AP on test), and every question for every paragraph
(Table 10's direction: ``val/p2q_*``, ``test["p2q"]``). The refiner and the loss are the
classes that ``model.refiner`` and ``model.loss`` name: their ``_target_``, or the short names
``refiner: fcrr | convrr | fcrr_convrr`` and ``loss.name: triplet | quadratic_conditional``
of retrieval_qa/registry.py, which configs and exports written before keep.

Triplet anchors (``anchor``): ``question`` (a question's hardest positive and negative
paragraphs in the batch, Table 9), ``paragraph`` (a paragraph's hardest positive and negative
questions, Table 10: "the closest question embedding would be the true pair for the
corresponding paragraph embedding"), ``both`` (the mean of the two, each side's refiner
trained against the other side's vectors as fixed targets), or ``auto``: the side that is
refined (``both`` for ``sides=both``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from omegaconf import DictConfig, OmegaConf

from ..evaluation.paragraph_retrieval import (
    PARAGRAPH_KS,
    evaluate_paragraphs,
    evaluate_questions_from_paragraphs,
    question_ranks,
    recall_at_k,
)
from ..evaluation.ranking import rank_of_score
from ..registry import instantiate, resolve_blocks
from ..written import atomic_path, read_json, write_text
from .artifact import load_weights
from .method import Built

SIDES = ("question", "paragraph", "both")
ANCHORS = ("auto", "question", "paragraph", "both")


def composed_settings(hparams: dict) -> dict:
    """The module's keyword arguments with ``refiner`` and ``loss`` as the blocks of their
    ``_target_``: what composition gives, and what the settings that configs and exports
    wrote before (``refiner: fcrr`` beside ``sf``, ``dropout``, ...; ``loss.name``) become.

    Args:
        hparams: the module's settings as saved (the ``model`` block, or an export's
            ``model.json`` ``hparams``).
    """
    cfg = OmegaConf.create({"model": dict(hparams)})
    resolve_blocks(cfg)
    return OmegaConf.to_container(cfg.model)


class ResidualRefinementModule(pl.LightningModule):
    """Refiners of frozen base embeddings (see the module docstring), trained on (question,
    its paragraph) vectors.

    Args:
        dim: the width of the base embeddings (:meth:`build` reads it from the data).
        refiner: the ``model.refiner`` block (``_target_`` and its arguments).
        sides: ``"question"``, ``"paragraph"`` or ``"both"``: which side is refined (the
            other is only l2-normalised).
        loss: the ``model.loss`` block (the triplet or the quadratic conditional loss).
        optimizer: Adam's ``lr`` and ``weight_decay``.
        test_ap: compute the average precision at test time.
        anchor: ``"auto"``, ``"question"``, ``"paragraph"`` or ``"both"`` (the triplets'
            anchor side; ``auto``: the refined side).

    Example:

        >>> import torch
        >>> from retrieval_qa.registry import instantiate
        >>> from retrieval_qa.config import compose_group
        >>> model = compose_group("model", "residual")  # conf/model/residual.yaml
        >>> module = instantiate(model, "model", dim=8)
        >>> q, p = torch.randn(4, 8), torch.randn(4, 8)
        >>> module.refine_questions(q).shape
        torch.Size([4, 8])
        >>> module.compute_loss(q, p, torch.tensor([0, 0, 1, 1])).shape
        torch.Size([])
    """

    def __init__(self, dim: int, *, refiner: dict, sides: str, loss: dict, optimizer: dict,
                 test_ap: bool, anchor: str) -> None:
        """The keyword arguments are the keys of ``conf/model/residual.yaml`` as composition
        gives them (their one source): ``refiner`` and ``loss`` name their classes
        (``_target_`` and its arguments: the refiner's ``sf``, ``dropout``, ...; the loss's
        ``margin`` and ``squared``), ``optimizer`` holds Adam's ``lr`` and ``weight_decay``."""
        super().__init__()
        self.save_hyperparameters()
        if sides not in SIDES:
            raise ValueError(f"model.sides={sides!r}; expected one of {list(SIDES)}")
        optimizer = dict(optimizer)
        missing = [k for k in ("lr", "weight_decay") if k not in optimizer]
        if missing:
            raise KeyError(f"model.optimizer lacks {missing} (fix: give them, as "
                           "conf/model/residual.yaml does)")
        if anchor not in ANCHORS:
            raise ValueError(f"model.anchor={anchor!r}; expected one of {list(ANCHORS)}")
        self.anchor = sides if anchor == "auto" else anchor
        self.loss = instantiate(loss, "model.loss", "loss")
        self.optimizer_cfg = optimizer
        make = lambda: instantiate(refiner, "model.refiner", "refiner", dim=dim)  # noqa: E731
        self.question_refiner = make() if sides in ("question", "both") else None
        self.paragraph_refiner = make() if sides in ("paragraph", "both") else None
        self.test_ap = test_ap
        self._ranks: list[torch.Tensor] = []
        self._val_q: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._test: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._index: torch.Tensor | None = None
        self.base_embedding: dict = {}
        self.test_results: dict = {}

    # ---- the method contract (models/method.py) ------------------------------------------
    @classmethod
    def build(cls, cfg: DictConfig) -> Built:
        """The data group embeds the paragraph task (``paragraph_vector_data``); the refiner's
        width is the base embedding's."""
        data = instantiate(cfg.data, "data")
        module = instantiate(cfg.model, "model", dim=int(data.train_split.questions.shape[1]))
        module.base_embedding = {"embedding": cfg.data.embedding, "idf": cfg.data.idf,
                                 "idf_corpus": cfg.data.idf_corpus}
        return Built(module, data)

    @classmethod
    def from_checkpoint(cls, path: str | Path, map_location: str = "cpu"
                        ) -> ResidualRefinementModule:
        """A training checkpoint's module, of this version or an earlier one (its settings
        as :func:`composed_settings` gives them)."""
        checkpoint = torch.load(path, map_location=map_location, weights_only=False)
        module = cls(**composed_settings(dict(checkpoint["hyper_parameters"])))
        module.load_state_dict(checkpoint["state_dict"])
        return module

    def export(self, folder: str | Path) -> Path:
        """The refiners (no optimiser state) and the base embedding they refine."""
        folder = Path(folder)
        with atomic_path(folder / "refiners.pt") as tmp:
            torch.save(self.cpu().state_dict(), tmp)
        meta = {"_target_": f"{RefinerArtifact.__module__}.{RefinerArtifact.__qualname__}",
                "hparams": dict(self.hparams), "base_embedding": self.base_embedding}
        write_text(folder / "model.json", json.dumps(meta, indent=2, default=str))  # last
        return folder

    def describe(self) -> dict:
        return {"trainable_parameters": sum(p.numel() for p in self.parameters()),
                "model": dict(self.hparams)}

    def refine_questions(self, q: torch.Tensor) -> torch.Tensor:
        return self.question_refiner(q) if self.question_refiner is not None \
            else F.normalize(q, dim=-1)

    def refine_paragraphs(self, p: torch.Tensor) -> torch.Tensor:
        return self.paragraph_refiner(p) if self.paragraph_refiner is not None \
            else F.normalize(p, dim=-1)

    def compute_loss(self, q, p, labels) -> torch.Tensor:
        rq, rp = self.refine_questions(q), self.refine_paragraphs(p)
        if not self.loss.in_batch_negatives:  # positive pairs only: no anchor side
            return self.loss(rq, rp)
        if self.anchor == "question":
            return self.loss(rq, rp, labels, labels)
        if self.anchor == "paragraph":
            return self.loss(rp, rq, labels, labels)
        # both: each side's refiner learns against the other side's current vectors as
        # fixed targets (stop-gradient), a one-step stand-in for the paper's sequence
        # (refine questions, refine paragraphs, fine-tune questions on top of them)
        return 0.5 * (self.loss(rq, rp.detach(), labels, labels)
                      + self.loss(rp, rq.detach(), labels, labels))

    def training_step(self, batch, batch_idx):
        q, p, labels = batch
        if self.loss.in_batch_negatives and bool((labels == labels[0]).all()):
            return None   # one paragraph in the whole batch: no negative, skip the step
        loss = self.compute_loss(q, p, labels)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"non-finite loss {loss.item()} at step {self.global_step}")
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=float(self.optimizer_cfg["lr"]),
                                weight_decay=float(self.optimizer_cfg["weight_decay"]))

    # ---- evaluation: the paragraphs are the data module's, refined once per loop ------
    def _paragraph_index(self, stage: str) -> torch.Tensor:
        dm = self.trainer.datamodule
        p = dm.val_paragraphs if stage == "val" else dm.test_paragraphs
        with torch.no_grad():
            return torch.cat([self.refine_paragraphs(c.to(self.device))
                              for c in p.split(8192)])

    def on_validation_epoch_start(self):
        self._index, self._ranks, self._val_q = self._paragraph_index("val"), [], []

    def validation_step(self, batch, batch_idx):
        q, gold = batch
        rq = self.refine_questions(q)
        s = rq @ self._index.T
        self._ranks.append(rank_of_score(s, s.gather(1, gold[:, None])).cpu())
        self._val_q.append((rq.cpu(), gold.cpu()))

    def on_validation_epoch_end(self):
        r = recall_at_k(torch.cat(self._ranks), PARAGRAPH_KS)
        for k in PARAGRAPH_KS:
            self.log(f"val/r@{k}", r[f"r@{k}"], prog_bar=k == 1)
        self.log("val/avg_recall", r["avg_recall"])
        # Table 10's direction: each held-out pair's paragraph ranks the held-out questions
        q = torch.cat([t[0] for t in self._val_q])
        gold = torch.cat([t[1] for t in self._val_q])
        r = recall_at_k(question_ranks(q, self._index.cpu(), gold), PARAGRAPH_KS)
        self.log("val/p2q_r@1", r["r@1"])
        self.log("val/p2q_avg_recall", r["avg_recall"])
        self._index, self._ranks, self._val_q = None, [], []

    def on_test_epoch_start(self):
        self._index, self._test = self._paragraph_index("test"), []

    def test_step(self, batch, batch_idx):
        q, gold = batch
        self._test.append((self.refine_questions(q).cpu(), gold.cpu()))

    def on_test_epoch_end(self):
        q = torch.cat([t[0] for t in self._test])
        gold = torch.cat([t[1] for t in self._test])
        p = self._index.cpu()
        self.test_results = evaluate_paragraphs(q, p, gold, with_ap=self.test_ap)
        self.test_results["p2q"] = evaluate_questions_from_paragraphs(q, p, gold)
        self._index, self._test = None, []


class RefinerArtifact:
    """The exported refiners: ``refine_questions`` / ``refine_paragraphs`` map base vectors
    of ``meta["base_embedding"]`` (what ``rqa evaluate --embedding`` computes) to refined,
    l2-normalised ones. Text encoding is not part of it: the IDF weights of the base
    embedding belong to the evaluated pool.

    Args:
        module: the trained refiners (put in eval mode).
        meta: the export's model.json (``_target_``, ``hparams``, ``base_embedding``).
    """

    def __init__(self, module: ResidualRefinementModule, meta: dict) -> None:
        self.module = module.eval()
        self.meta = meta

    @classmethod
    def load(cls, folder: str | Path, map_location: str = "cpu") -> RefinerArtifact:
        folder = Path(folder)
        meta = read_json(folder / "model.json", ("hparams",))
        module = ResidualRefinementModule(**composed_settings(meta["hparams"]))
        module.load_state_dict(load_weights(folder / "refiners.pt", map_location))
        return cls(module, meta)

    @torch.inference_mode()
    def refine_questions(self, vectors: torch.Tensor) -> torch.Tensor:
        return self.module.refine_questions(vectors)

    @torch.inference_mode()
    def refine_paragraphs(self, vectors: torch.Tensor) -> torch.Tensor:
        return self.module.refine_paragraphs(vectors)

    def _no_text(self, *args, **kwargs):
        raise TypeError(f"this artefact refines base vectors ({self.meta['base_embedding']}), it "
                        "does not encode text: compute the base embeddings first (rqa evaluate "
                        "--embedding ...), then call refine_questions / refine_paragraphs")

    encode_questions = encode_answers = _no_text
