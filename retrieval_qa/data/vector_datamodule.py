"""DataModule over cached base embeddings of the paragraph task (residual-embedding paper,
4.3), given as vectors (:mod:`retrieval_qa.embeddings.paragraph_data` computes them and
builds this module, so data/ needs nothing of embeddings/): training batches of (question
vector, its paragraph vector, paragraph id) from the train file, minus ``val_questions``
held-out questions ranked against every train paragraph for model selection; the test pool
(dev file) for the final numbers."""

from __future__ import annotations

from dataclasses import dataclass

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from .resumable import ResumableDataLoader
from .seeded_loader import SeededDataLoader


@dataclass
class VectorSplit:
    """One file's vectors of the paragraph task.

    Attributes:
        questions: ``[Q, D]`` the questions' vectors.
        paragraphs: ``[P, D]`` the paragraphs' vectors.
        gold: ``[Q]`` each question's paragraph (row of ``paragraphs``).
    """
    questions: torch.Tensor       # [Q, D]
    paragraphs: torch.Tensor      # [P, D]
    gold: torch.Tensor            # [Q] paragraph index


class ParagraphVectorDataModule(pl.LightningDataModule):
    def __init__(self, train: VectorSplit, test: VectorSplit | None, *, val_questions: int,
                 batch_size: int, eval_batch_size: int, max_train_pairs: int | None, seed: int,
                 notes: dict | None = None) -> None:
        """The keyword arguments are those of conf/data/squad_paragraphs.yaml (``seed``: its
        ``split_seed``), given by
        :func:`~retrieval_qa.embeddings.paragraph_data.paragraph_vector_data`.

        Args:
            train: the train file's vectors.
            test: the dev file's (the test pool); None: no test.
            val_questions: train questions held out for validation.
            batch_size: training pairs per batch.
            eval_batch_size: questions per evaluation batch.
            max_train_pairs: the most training pairs; None: all.
            seed: the split's and the loaders' seed.
            notes: extra entries of :meth:`describe`; None: none.
        """
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
        """Shuffled by ``(seed, epoch)`` and resumable mid-epoch (:class:`ResumableDataLoader`);
        the loaders draw nothing from the global generator (:mod:`.seeded_loader`)."""
        s, i = self.train_split, self.train_index
        g = s.gold[i]
        ds = TensorDataset(s.questions[i], s.paragraphs[g], g)
        return ResumableDataLoader(ds, batch_size=self.batch_size, shuffle=True, drop_last=True,
                                   seed=self.seed, role="train", epoch_of=self)

    def val_dataloader(self) -> DataLoader:
        s, i = self.train_split, self.val_index
        return SeededDataLoader(TensorDataset(s.questions[i], s.gold[i]),
                                batch_size=self.eval_batch_size, seed=self.seed, role="val",
                                epoch_of=self)

    def test_dataloader(self) -> DataLoader:
        s = self.test_split
        return SeededDataLoader(TensorDataset(s.questions, s.gold),
                                batch_size=self.eval_batch_size, seed=self.seed, role="test",
                                epoch_of=self)

    def describe(self) -> dict:
        return {"train_pairs": int(self.train_index.numel()),
                "val_questions": int(self.val_index.numel()),
                "train_paragraphs": int(self.train_split.paragraphs.shape[0]),
                "test_questions": None if self.test_split is None
                else int(self.test_split.questions.shape[0]),
                "test_paragraphs": None if self.test_split is None
                else int(self.test_split.paragraphs.shape[0]),
                "batch_size": self.batch_size, **self.notes}
