"""DataModule over cached base embeddings of the paragraph task (residual-embedding paper,
4.3): training batches of (question vector, its paragraph vector, paragraph id) from the
train file, minus ``val_questions`` held-out questions ranked against every train paragraph
for model selection; the test pool (dev file) for the final numbers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from .paragraphs import load_paragraph_task


@dataclass
class VectorSplit:
    questions: torch.Tensor       # [Q, D]
    paragraphs: torch.Tensor      # [P, D]
    gold: torch.Tensor            # [Q] paragraph index


class ParagraphVectorDataModule(pl.LightningDataModule):
    def __init__(self, train: VectorSplit, test: VectorSplit | None = None,
                 val_questions: int = 5000, batch_size: int = 512,
                 eval_batch_size: int = 4096, max_train_pairs: int | None = None,
                 seed: int = 0, notes: dict | None = None) -> None:
        super().__init__()
        n = train.questions.shape[0]
        if not 0 < val_questions < n:
            raise ValueError(f"data.val_questions={val_questions} must be between 1 and the "
                             f"{n - 1} training questions")
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
        self.val_index, self.train_index = perm[:val_questions], perm[val_questions:]
        if max_train_pairs:
            self.train_index = self.train_index[:max_train_pairs]
        self.train_split, self.test_split = train, test
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.seed = seed
        self.notes = notes or {}

    @property
    def val_paragraphs(self) -> torch.Tensor:
        return self.train_split.paragraphs

    @property
    def test_paragraphs(self) -> torch.Tensor:
        return self.test_split.paragraphs

    def train_dataloader(self) -> DataLoader:
        s, i = self.train_split, self.train_index
        g = s.gold[i]
        ds = TensorDataset(s.questions[i], s.paragraphs[g], g)
        return DataLoader(ds, batch_size=self.batch_size, shuffle=True, drop_last=True,
                          generator=torch.Generator().manual_seed(self.seed))

    def val_dataloader(self) -> DataLoader:
        s, i = self.train_split, self.val_index
        return DataLoader(TensorDataset(s.questions[i], s.gold[i]),
                          batch_size=self.eval_batch_size)

    def test_dataloader(self) -> DataLoader:
        s = self.test_split
        return DataLoader(TensorDataset(s.questions, s.gold), batch_size=self.eval_batch_size)

    def describe(self) -> dict:
        return {"train_pairs": int(self.train_index.numel()),
                "val_questions": int(self.val_index.numel()),
                "train_paragraphs": int(self.train_split.paragraphs.shape[0]),
                "test_questions": None if self.test_split is None
                else int(self.test_split.questions.shape[0]),
                "test_paragraphs": None if self.test_split is None
                else int(self.test_split.paragraphs.shape[0]),
                "batch_size": self.batch_size, **self.notes}


def vector_split(pool: str, data_dir: str | Path | None, embedding: str, idf: bool,
                 idf_corpus: str, layer_weights: list[float] | None = None
                 ) -> tuple[VectorSplit, dict]:
    """One pool of the paragraph task as base vectors (computed once, then cached)."""
    from ..embeddings.base import task_embeddings

    task = load_paragraph_task(pool, data_dir)
    q, p, meta = task_embeddings(task, embedding, idf, idf_corpus, layer_weights=layer_weights)
    return VectorSplit(q, p, torch.tensor(task.gold)), {
        "pool": pool, "questions": len(task.questions), "paragraphs": len(task.paragraphs),
        "cache": meta["cache"], "sources": meta["source_files"]}


def paragraph_vector_data(train_pool: str = "train", test_pool: str = "dev",
                          data_dir: str | Path | None = None, embedding: str = "static:glove50",
                          idf: bool = True, idf_corpus: str = "paragraphs",
                          val_questions: int = 5000, max_train_pairs: int | None = None,
                          split_seed: int = 0, batch_size: int = 512,
                          eval_batch_size: int = 4096, layer_weights: list[float] | None = None
                          ) -> ParagraphVectorDataModule:
    """The ``data`` group ``squad_paragraphs``: both pools embedded (cached), then the
    DataModule; its arguments are the keys of ``conf/data/squad_paragraphs.yaml``."""
    if layer_weights is not None:
        if not embedding.startswith("contextual:"):
            raise ValueError(f"data.layer_weights={list(layer_weights)} combines the layers of a "
                             f"contextual:NAME embedding, not of {embedding!r}: set it to null")
        layer_weights = [float(w) for w in layer_weights]
    train, train_notes = vector_split(train_pool, data_dir, embedding, idf, idf_corpus,
                                      layer_weights)
    test, test_notes = vector_split(test_pool, data_dir, embedding, idf, idf_corpus,
                                    layer_weights)
    return ParagraphVectorDataModule(
        train, test, val_questions, batch_size, eval_batch_size, max_train_pairs, split_seed,
        notes={"embedding": embedding, "idf": idf, "idf_corpus": idf_corpus if idf else None,
               **({"layer_weights": layer_weights} if layer_weights is not None else {}),
               "train_source": train_notes, "test_source": test_notes,
               "test": {"dataset": "squad_paragraphs", "pool": test_pool}})
