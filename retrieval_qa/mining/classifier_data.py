"""The classifier's DataModule (``conf/data/mining_classifier.yaml``): the labelled examples of
:mod:`.negatives` for a training pool (split 9:1 into train and dev) and a test pool, built
once and kept as JSONL files, then batched with the model's collator.

Building needs the pools' BM25 and dense top 10 (the dense retriever: an exported dual
encoder, ``dense_retriever``, read by :func:`~retrieval_qa.models.artifact.load_artifact`);
its encodings are kept in shards under the examples folder, so an interrupted build resumes.
The folder is named by a digest of everything the examples depend on (pools, caps, seed,
BM25 settings, retriever files): another setting builds another folder, never mixes.

Baselines beside the classifier (Table 2 of the paper): the majority class (always
"negative") and the dense retriever used as a classifier (its similarity; accuracy at the
threshold that is best on the training examples, AUC-PR needs none).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

from ..data.io import file_sha256
from ..data.loading import load_pool
from ..data.pool_index import known_positives
from ..data.resumable import ResumableDataLoader
from ..data.seeded_loader import SeededDataLoader
from ..data.subsets import document_subset
from ..data.types import RetrievalPool
from ..written import Damaged, check, read_back, read_json, rebuilding, write_text
from .examples import (
    ClassifierExample,
    ExampleDataset,
    example_counts,
    read_examples,
    write_examples,
)
from .negatives import NEGATIVE_SOURCES, dev_questions, sample_examples
from .neighbours import bm25_neighbours, dense_neighbours

log = logging.getLogger(__name__)
SPLITS = ("train", "dev", "test")


def file_digest(path: Path) -> str:
    """The sha256 hex digest of a file's content.

    Args:
        path: the file (read in blocks of 1 MiB).
    """
    return file_sha256(path)


def artifact_digest(folder: str | Path) -> str:
    """A digest of an exported model's files (weights and settings).

    Args:
        folder: the export folder; every file under it counts, by relative path and content.
    """
    folder = Path(folder)
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(folder)).encode() + b"\0" + file_digest(p).encode())
    return h.hexdigest()


def best_threshold(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """The threshold ``t`` (predict positive when score >= t) with the best accuracy on these
    examples (the lowest such t); midpoints between sorted scores.

    Args:
        scores: ``[N]`` scores, higher meaning more likely positive.
        labels: ``[N]`` labels, 1 positive, 0 negative.

    Example:

        >>> import torch
        >>> round(best_threshold(torch.tensor([0.9, 0.6, 0.2]), torch.tensor([1, 1, 0])), 4)
        0.4
    """
    order = torch.argsort(scores, descending=True)
    s, y = scores[order], labels[order].float()
    # predicting the top j as positive: correct = positives in top j + negatives below
    tp = torch.cat([torch.zeros(1), torch.cumsum(y, 0)])
    neg_below = (1 - y).sum() - torch.cat([torch.zeros(1), torch.cumsum(1 - y, 0)])
    correct = tp + neg_below
    j = int(torch.argmax(correct))
    if j == 0:
        return float(s[0]) + 1.0
    if j == len(s):
        return float(s[-1])
    return float((s[j - 1] + s[j]) / 2)


def binary_metrics(scores: torch.Tensor, labels: torch.Tensor, threshold: float = 0.5
                   ) -> dict[str, float]:
    """Accuracy of ``score >= threshold`` and AUC-PR (average precision, torchmetrics; any
    monotone score, e.g. a cosine), as percentages.

    Args:
        scores: ``[N]`` scores.
        labels: ``[N]`` labels, 1 positive, 0 negative.
        threshold: a score at or above it predicts positive.

    Example:

        >>> import torch
        >>> binary_metrics(torch.tensor([0.9, 0.6, 0.2]), torch.tensor([1, 0, 0]))
        {'acc': 66.67, 'auc_pr': 100.0}
    """
    from torchmetrics.functional.classification import binary_average_precision

    labels = labels.long()
    acc = ((scores >= threshold).long() == labels).float().mean()
    ap = binary_average_precision(scores.float(), labels)
    return {"acc": round(100 * float(acc), 2), "auc_pr": round(100 * float(ap), 2)}


class MiningClassifierData(pl.LightningDataModule):
    """The keyword arguments are the keys of ``conf/data/mining_classifier.yaml``, the one
    source of their values (required here: no second default).

    Args:
        collator: turns a list of examples into a batch (the model's,
            :meth:`MiningClassifier.collator`).
        train_dataset: the training pool's dataset (split 9:1 into train and dev).
        train_pool: its pool.
        test_dataset: the test pool's dataset.
        test_pool: its pool.
        data_dir: the data folder; None: $RQA_DATA_DIR, then ``../shared/data``.
        dense_retriever: the folder of an exported dual encoder (required to build).
        top_k: the BM25 / dense neighbours a negative is drawn from.
        dev_fraction: the share of training questions in the dev split.
        seed: the seed of the split, the negatives and the training order.
        max_train_documents: a seeded sample of training paragraphs; None: all.
        max_test_documents: a seeded sample of test paragraphs; None: all.
        examples_dir: where the built examples and encodings are kept (reused, resumable).
        batch_size: training examples per batch.
        eval_batch_size: dev and test examples per batch.
        num_workers: the loaders' worker processes.
        tokenizer: unused (the collator tokenises); accepted as every data module's.
    """

    def __init__(self, collator, *, train_dataset: str, train_pool: str, test_dataset: str,
                 test_pool: str, data_dir: str | None, dense_retriever: str | None, top_k: int,
                 dev_fraction: float, seed: int, max_train_documents: int | None,
                 max_test_documents: int | None, examples_dir: str, batch_size: int,
                 eval_batch_size: int, num_workers: int, tokenizer=None) -> None:
        super().__init__()
        del tokenizer  # the collator tokenises
        self.collator = collator
        self.train_dataset, self.train_pool = train_dataset, train_pool
        self.test_dataset, self.test_pool = test_dataset, test_pool
        self.data_dir = data_dir
        self.dense_retriever = dense_retriever
        self.top_k, self.dev_fraction, self.seed = int(top_k), float(dev_fraction), int(seed)
        self.max_train_documents, self.max_test_documents = max_train_documents, max_test_documents
        self.examples_dir = Path(examples_dir)
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.num_workers = num_workers
        self.examples: dict[str, list[ClassifierExample]] = {}
        self.info: dict[str, Any] = {}

    # ---- building ---------------------------------------------------------------------
    @staticmethod
    def _bm25_settings():
        """BM25 as the baseline runs it: conf/model/bm25.yaml."""
        from ..baselines.bm25 import BM25Settings
        from ..config import model_defaults

        return BM25Settings.from_config(model_defaults("bm25"))

    def _pools(self) -> dict[str, tuple[RetrievalPool, dict]]:
        train, train_notes = load_pool(self.train_dataset, self.train_pool, self.data_dir)
        test, test_notes = load_pool(self.test_dataset, self.test_pool, self.data_dir)
        return {"train": (document_subset(train, self.max_train_documents, self.seed),
                          train_notes),
                "test": (document_subset(test, self.max_test_documents, self.seed), test_notes)}

    def folder(self, pools: dict[str, tuple[RetrievalPool, dict]]) -> Path:
        if not self.dense_retriever:
            raise ValueError("data.dense_retriever is not set: the dense negatives need an "
                             "exported dual encoder (e.g. `rqa export experiment=mining_dual "
                             "profile=cpu --output DIR`, or the `checkpoint` of a trained one)")
        key = {"pools": {k: [p.dataset, p.pool, p.source, len(p.candidates), len(p.questions)]
                         for k, (p, _) in pools.items()},
               "bm25": self._bm25_settings().to_dict(), "top_k": self.top_k,
               "dev_fraction": self.dev_fraction, "seed": self.seed,
               "retriever": artifact_digest(self.dense_retriever), "version": 1}
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
        return self.examples_dir / digest

    def _build_pool(self, name: str, pool: RetrievalPool, retriever, folder: Path
                    ) -> tuple[list[ClassifierExample], dict]:
        positives = known_positives(pool)
        log.info("%s: BM25 top %d of %d questions", name, self.top_k, len(pool.questions))
        bm25 = bm25_neighbours(pool, positives, self.top_k, self._bm25_settings())
        retriever.work_dir = folder / f"encodings-{name}"  # resumable shards
        q = retriever.encode_questions(pool.questions)
        c = retriever.encode_answers(pool.candidates)
        dense = dense_neighbours(q, c, positives, self.top_k)
        sampled = sample_examples(pool, positives, bm25, dense, self.seed,
                                  dense_score=lambda i, j: float(q[i] @ c[j]))
        return sampled.examples, {"shortfall": sampled.shortfall}

    def prepare_examples(self) -> Path:
        """Build the examples (or find them built); returns their folder."""
        pools = self._pools()
        folder = self.folder(pools)
        meta_file = folder / "meta.json"
        if meta_file.exists():
            try:
                self.info, self.examples = self._read_folder(folder)
                return folder
            except Damaged as damage:
                rebuilding(damage, log)
                self.examples = {}
        from ..models.artifact import load_artifact

        retriever = load_artifact(self.dense_retriever)
        info: dict[str, Any] = {"retriever": str(self.dense_retriever), "top_k": self.top_k,
                                "seed": self.seed, "dev_fraction": self.dev_fraction,
                                "bm25": self._bm25_settings().to_dict(), "pools": {}}
        train_pool, train_notes = pools["train"]
        examples, notes = self._build_pool("train", train_pool, retriever, folder)
        dev_keys = dev_questions(train_pool, self.dev_fraction, self.seed)
        built = {"train": [e for e in examples if e.question_id not in dev_keys],
                 "dev": [e for e in examples if e.question_id in dev_keys]}
        info["pools"]["train"] = self._pool_info(train_pool, train_notes, notes)
        test_pool, test_notes = pools["test"]
        built["test"], notes = self._build_pool("test", test_pool, retriever, folder)
        info["pools"]["test"] = self._pool_info(test_pool, test_notes, notes)
        for split in SPLITS:
            write_examples(folder / f"{split}.jsonl", built[split])
        info["examples"] = {split: len(built[split]) for split in SPLITS}
        write_text(meta_file, json.dumps(info, indent=2))  # last: marks the folder complete
        self.info, self.examples = info, built
        return folder

    @staticmethod
    def _read_folder(folder: Path) -> tuple[dict, dict[str, list[ClassifierExample]]]:
        """(meta, examples by split) of a built folder, or
        :class:`~retrieval_qa.written.Damaged` naming the file."""
        info = read_json(folder / "meta.json", ("examples", "pools"))
        examples = {}
        for split in SPLITS:
            path = folder / f"{split}.jsonl"
            examples[split] = read_back(path, read_examples, "classifier examples")
            check(len(examples[split]) == info["examples"].get(split), path,
                  f"{len(examples[split])} examples, meta.json says "
                  f"{info['examples'].get(split)} (truncated)")
        return info, examples

    @staticmethod
    def _pool_info(pool: RetrievalPool, notes: dict, built: dict) -> dict:
        info = {"dataset": pool.dataset, "pool": pool.pool, "source": pool.source,
                "questions": len(pool.questions), "candidates": len(pool.candidates), **built}
        if notes.get("rebuilt"):
            info["rebuilt"] = notes.get("rebuild_note")
        return info

    def setup(self, stage: str | None = None) -> None:
        if self.examples:
            return
        folder = self.prepare_examples()
        self.info["folder"] = str(folder)

    # ---- loaders ----------------------------------------------------------------------
    def train_dataloader(self) -> DataLoader:
        """Shuffled by ``(seed, epoch)`` and resumable mid-epoch (:class:`ResumableDataLoader`);
        the loaders draw nothing from the global generator (:mod:`..data.seeded_loader`)."""
        return ResumableDataLoader(ExampleDataset(self.examples["train"]),
                                   batch_size=self.batch_size, shuffle=True,
                                   collate_fn=self.collator, num_workers=self.num_workers,
                                   seed=self.seed, role="train", epoch_of=self)

    def _eval_loader(self, split: str) -> DataLoader:
        return SeededDataLoader(ExampleDataset(self.examples[split]),
                                batch_size=self.eval_batch_size, shuffle=False,
                                collate_fn=self.collator, num_workers=self.num_workers,
                                seed=self.seed, role=split, epoch_of=self)

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("dev")

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader("test")

    # ---- baselines and report -----------------------------------------------------------
    def baselines(self, split: str) -> dict:
        """Majority class and the dense retriever as a classifier, on ``split``."""
        examples = self.examples[split]
        labels = torch.tensor([e.label for e in examples])
        out = {"majority": {"acc": round(100 * float((labels == 0).float().mean()), 2),
                            "auc_pr": None}}
        train = [e for e in self.examples["train"] if not math.isnan(e.dense_score)]
        scores = torch.tensor([e.dense_score for e in examples])
        if train and not torch.isnan(scores).any():
            t = best_threshold(torch.tensor([e.dense_score for e in train]),
                               torch.tensor([e.label for e in train]))
            metrics = binary_metrics(scores, labels, t)
            out["dual_encoder"] = {**metrics, "threshold": round(t, 6),
                                   "retriever": str(self.dense_retriever),
                                   "threshold_from": "best accuracy on the training examples"}
        return out

    def describe(self) -> dict:
        self.setup()
        counts = {s: example_counts(self.examples[s]) for s in SPLITS}
        return {**self.info, "splits": counts,
                "negatives": "1:1:1 per question from " + ", ".join(NEGATIVE_SOURCES)
                             + " (never a known positive; a source with nothing left is "
                               "counted in shortfall)",
                "batch_size": self.batch_size,
                "test": {"dataset": self.test_dataset, "pool": self.test_pool,
                         "examples": counts["test"]["examples"],
                         "baselines": self.baselines("test")},
                "dev_baselines": self.baselines("dev")}
