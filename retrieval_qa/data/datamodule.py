"""The LightningDataModule every method trains and validates with: a thin composition of its
parts, each of which can be built and tested alone.

* :mod:`.pools` (:class:`~.pools.Pools`): the training pool (``train_dataset/train_pool``)
  split 9:1 with :func:`~.split.train_val_split` (no question or answer sentence on both
  sides) into the training pairs and the validation pool; the test pool
  (``test_dataset/test_pool``); the caps ``max_train_pairs``, ``max_val_questions`` and
  ``max_test_questions`` (deterministic subsets seeded by ``split_seed``; the test cap is for
  quick checks, never a reported result).
* :mod:`.training_pairs` (:class:`~.training_pairs.TrainingPairs`): the split's pairs plus
  the extra pair sources (``extra_pairs``, :meth:`ReQADataModule.add_pair_source`) with
  their weights, minus source pairs that overlap the validation pool.
* :mod:`.token_memo` (:class:`~.token_memo.TokenMemo`): the texts tokenised once per list,
  the lengths and the collators (or frozen ``features`` in place of tokens).
* :mod:`.loaders` (:class:`~.loaders.Loaders`): the duplicate-free sampler, the DDP checks
  and the loaders.

Loaders:

* ``train_dataloader()``: items ``(index, QAPair[, weight])`` batched by
  :class:`NoDuplicatesBatchSampler`, collated by :class:`PairCollator` into
  ``{"question": {...}, "answer": {...}, "index": LongTensor[B][, "weight": FloatTensor[B]]}``.
  Under DDP (``trainer.world_size > 1``) the sampler shards duplicate-free global batches
  itself: the Trainer must be built with ``use_distributed_sampler=False``.
* ``val_dataloader()`` / ``test_dataloader()``: ``[candidates, questions]``; dataloader 0
  encodes ``pool.candidates`` (answer side), 1 ``pool.questions`` (question side), batches
  ``{"input_ids", "attention_mask"[, "token_type_ids"], "index"}`` plus the labels the
  evaluator needs (``"gold"``: each question's gold candidate indices; ``"doc"``: each
  candidate's document number; ``"same_as"``: the first candidate with the same encoder
  input, whose embedding its copies take), where ``index`` points into the pool's list.
  Items are ordered longest first (little padding); under DDP rank ``r`` of
  ``w`` takes every ``w``-th item of that order, and ``index`` lets the module reassemble the
  full matrices.

Every loader has its own generator, seeded from ``sampler_seed``, the epoch and its role
(:mod:`.seeded_loader`): none draws from the global torch generator, so a resumed run's
dropout draws what the uninterrupted run's did.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from omegaconf import DictConfig
from torch.utils.data import DataLoader

from ..registry import config_values
from .features import FeatureTable
from .loaders import Loaders, LoaderSettings
from .pool_index import doc_index
from .pools import Pools, PoolSettings
from .sampler import NoDuplicatesBatchSampler
from .token_memo import TokenMemo, TokenSettings, load_features
from .training_pairs import TrainingPairs
from .types import QAPair, RetrievalPool


class ReQADataModule(pl.LightningDataModule):
    """See the module docstring. The keyword arguments are the keys of
    ``conf/data/reqa_squad.yaml``, their one source (:meth:`from_config`), grouped into the
    parts' settings (:class:`~.pools.PoolSettings`, :class:`~.token_memo.TokenSettings`,
    :class:`~.loaders.LoaderSettings`); ``tokenizer`` is a Hugging Face tokenizer;
    ``sampler_seed`` with the epoch fixes the training order.

    Args:
        tokenizer: a Hugging Face tokenizer (None with ``features``).
        train_dataset, train_pool, test_dataset, test_pool, data_dir, val_fraction,
            split_seed, max_train_pairs, max_val_questions, max_test_questions: the pools
            (:class:`~.pools.PoolSettings`).
        max_question_length, max_answer_length, answer_with_context, pad_to_multiple_of:
            the token batches (:class:`~.token_memo.TokenSettings`).
        batch_size, eval_batch_size, bucket_by_length, bucket_unit, num_workers, pin_memory,
            sampler_seed: the sampler and loaders (:class:`~.loaders.LoaderSettings`).
        extra_pairs: more training pairs, ``[{path, weight, name}, ...]`` or None
            (:class:`~.training_pairs.TrainingPairs`).
        features: frozen features in place of tokens (a file or a table), or None.
    """

    def __init__(self, tokenizer, *, train_dataset: str, train_pool: str, test_dataset: str,
                 test_pool: str, data_dir: str | Path | None, val_fraction: float,
                 split_seed: int, max_train_pairs: int | None, max_val_questions: int | None,
                 max_test_questions: int | None,
                 max_question_length: int, max_answer_length: int, answer_with_context: bool,
                 batch_size: int, eval_batch_size: int, bucket_by_length: bool,
                 bucket_unit: str, num_workers: int, pin_memory: bool | str,
                 pad_to_multiple_of: int | None, sampler_seed: int,
                 extra_pairs: Sequence[dict] | None, features: str | Path | FeatureTable | None
                 ) -> None:
        super().__init__()
        features = load_features(features)
        self.loaders = Loaders(LoaderSettings(
            batch_size=batch_size, eval_batch_size=eval_batch_size,
            bucket_by_length=bucket_by_length, bucket_unit=bucket_unit,
            num_workers=num_workers, pin_memory=pin_memory, sampler_seed=sampler_seed), self)
        self.tokens = TokenMemo(tokenizer, TokenSettings(
            max_question_length=max_question_length, max_answer_length=max_answer_length,
            answer_with_context=answer_with_context, pad_to_multiple_of=pad_to_multiple_of),
            features)
        self.training_pairs = TrainingPairs.from_config(extra_pairs)
        self.pools = Pools(PoolSettings(
            train_dataset=train_dataset, train_pool=train_pool, test_dataset=test_dataset,
            test_pool=test_pool, data_dir=data_dir, val_fraction=val_fraction,
            split_seed=split_seed, max_train_pairs=max_train_pairs,
            max_val_questions=max_val_questions, max_test_questions=max_test_questions))
        self._info: dict[str, Any] = {}   # the report's entries, in the order they came

    @classmethod
    def from_config(cls, cfg: DictConfig | dict, tokenizer, **overrides) -> ReQADataModule:
        """Build from the ``data`` config (interpolations resolved); ``overrides`` win. An
        unknown key is an error naming it.

        Args:
            cfg: the ``data`` block.
            tokenizer: a Hugging Face tokenizer.
            overrides: values over the block's.
        """
        values = config_values(cfg)
        values.update(overrides)
        try:
            return cls(tokenizer, **values)
        except TypeError as e:
            raise TypeError(f"data config: {e} (keys: {sorted(values)})") from e

    # ---- the settings, by their config keys -----------------------------------------------
    tokenizer = property(lambda self: self.tokens.tokenizer,
                         doc="The tokenizer, or the feature table in its place.")
    features = property(lambda self: self.tokens.features, doc="Frozen features, or None.")
    pretokenized = property(lambda self: self.tokens.pretokenized,
                            doc="Batches are cut from ids tokenised beforehand.")
    max_question_length = property(lambda self: self.tokens.settings.max_question_length)
    max_answer_length = property(lambda self: self.tokens.settings.max_answer_length)
    answer_with_context = property(lambda self: self.tokens.settings.answer_with_context)
    pad_to_multiple_of = property(lambda self: self.tokens.settings.pad_to_multiple_of)
    batch_size = property(lambda self: self.loaders.settings.batch_size)
    eval_batch_size = property(lambda self: self.loaders.settings.eval_batch_size)
    bucket_by_length = property(lambda self: self.loaders.settings.bucket_by_length)
    bucket_unit = property(lambda self: self.loaders.settings.bucket_unit)
    num_workers = property(lambda self: self.loaders.settings.num_workers)
    pin_memory = property(lambda self: self.loaders.settings.pin_memory,
                          doc="Page-locked batches (``auto`` resolved).")
    sampler_seed = property(lambda self: self.loaders.settings.sampler_seed)
    train_dataset = property(lambda self: self.pools.settings.train_dataset)
    train_pool_name = property(lambda self: self.pools.settings.train_pool)
    test_dataset = property(lambda self: self.pools.settings.test_dataset)
    test_pool_name = property(lambda self: self.pools.settings.test_pool)
    data_dir = property(lambda self: self.pools.settings.data_dir)
    val_fraction = property(lambda self: self.pools.settings.val_fraction)
    split_seed = property(lambda self: self.pools.settings.split_seed)
    max_train_pairs = property(lambda self: self.pools.settings.max_train_pairs)
    max_val_questions = property(lambda self: self.pools.settings.max_val_questions)
    max_test_questions = property(lambda self: self.pools.settings.max_test_questions)
    pair_sources = property(lambda self: self.training_pairs.sources,
                            doc="The extra pair sources (:class:`~.pair_sources.PairSource`).")
    train_weights = property(lambda self: self.training_pairs.weights,
                             doc="Per-pair weights aligned with train_pairs, or None.")

    # ---- pools ----------------------------------------------------------------------------
    def _setup_train(self) -> None:
        """The training split and the validation pool (once), then the training pairs;
        subclasses that train on other pairs override this and call
        ``self.training_pairs.set_split``."""
        if self.training_pairs.split_pairs is not None:
            return
        split = self.pools.train_split()
        self.training_pairs.set_split(split.pairs, split.val_pool)
        self._note_sources()   # the report's order: extra_pairs, then train and val
        self._info["train"], self._info["val"] = split.train_info, split.val_info

    def _note_sources(self) -> None:
        if self.training_pairs.report is not None:
            self._info["extra_pairs"] = self.training_pairs.report

    @property
    def train_pairs(self) -> list[QAPair]:
        self._setup_train()
        return self.training_pairs.pairs

    @property
    def val_pool(self) -> RetrievalPool:
        self._setup_train()
        return self.training_pairs.val_pool

    @property
    def test_pool(self) -> RetrievalPool:
        """Loaded on first use (also after ``fit``, without ``setup("test")``)."""
        return self.pools.test_pool

    def setup(self, stage: str | None = None) -> None:
        if stage in (None, "fit", "validate"):
            self._setup_train()
        if stage in (None, "test"):
            _ = self.test_pool
        if stage in (None, "fit", "validate"):
            self.tokens.check_pairs_covered(self.train_pairs, "training")
            self.tokens.check_pool_covered(self.val_pool, "validation")
        if stage in (None, "test"):
            self.tokens.check_pool_covered(self.test_pool, "test")

    # ---- extra pair sources (e.g. mined pairs with weights) -------------------------------
    def add_pair_source(self, name: str, pairs: Sequence[QAPair],
                        weights: Sequence[float] | None = None) -> None:
        """More training pairs, each with a weight (default 1) carried into batches as
        ``"weight"``; the split's own pairs weigh 1. Takes effect at the next
        ``train_dataloader()``.

        Args:
            name: the source's name in the report.
            pairs: its pairs.
            weights: one weight per pair; None: each weighs 1.
        """
        self.training_pairs.add(name, pairs, weights)
        self._note_sources()

    def set_train_weights(self, weights: Sequence[float] | None) -> None:
        """Per-pair weights (aligned with :attr:`train_pairs`), carried into batches as
        ``"weight"``; None removes them. Takes effect at the next ``train_dataloader()``.

        Args:
            weights: one weight per training pair, or None.
        """
        if weights is not None:
            self._setup_train()
        self.training_pairs.set_weights(weights)

    # ---- loaders --------------------------------------------------------------------------
    def pair_lengths(self, pairs: Sequence[QAPair]) -> list[int]:
        """:func:`~.pair_lengths.pair_lengths` with this module's tokenizer, lengths and unit
        (token counts read off the pre-tokenised ids: the same numbers).

        Args:
            pairs: training pairs.
        """
        return self.tokens.pair_lengths(pairs, self.bucket_unit)

    def train_sampler(self) -> NoDuplicatesBatchSampler:
        """This rank's duplicate-free batches of :attr:`train_pairs` at the Trainer's epoch."""
        return self.loaders.train_sampler(self.train_pairs, self.pair_lengths)

    def train_dataloader(self) -> DataLoader:
        self.loaders.check_distributed_sampler()
        pairs = self.train_pairs
        sampler = self.train_sampler()
        return self.loaders.train_loader(pairs, self.train_weights, sampler,
                                         self.tokens.pair_collator(pairs))

    def _eval_loaders(self, pool: RetrievalPool, stage: str) -> list[DataLoader]:
        candidates, questions = self.tokens.eval_sides(pool)
        # a candidate's labels: its document, and the first candidate with its encoder input
        labels = list(zip(doc_index(pool)[0].tolist(), self.tokens.first_copies(pool),
                          strict=True))
        return [self.loaders.eval_loader(pool.candidates, candidates.lengths, labels,
                                         candidates.collate_fn, f"{stage}/candidates"),
                self.loaders.eval_loader(pool.questions, questions.lengths, pool.gold,
                                         questions.collate_fn, f"{stage}/questions")]

    def val_dataloader(self) -> list[DataLoader]:
        return self._eval_loaders(self.val_pool, "val")

    def test_dataloader(self) -> list[DataLoader]:
        return self._eval_loaders(self.test_pool, "test")

    # ---- report ---------------------------------------------------------------------------
    def describe(self) -> dict:
        """Counts, caps and pools used, for the run's JSON output."""
        self._setup_train()
        world = self.loaders.world()[0]
        return {
            **self._info, "test": self.pools.describe_test(),
            "split": self.pools.describe_split(),
            "batch_size": self.batch_size, "global_batch_size": self.batch_size * world,
            "eval_batch_size": self.eval_batch_size, "bucket_by_length": self.bucket_by_length,
            "bucket_unit": self.bucket_unit,
            "sampler": "no duplicate question or answer text in a (global) batch",
            "sampler_seed": self.sampler_seed, "weighted": self.train_weights is not None,
            "max_question_length": self.max_question_length,
            "max_answer_length": self.max_answer_length,
            "answer_with_context": self.answer_with_context,
            "pretokenized": self.pretokenized, "pad_to_multiple_of": self.pad_to_multiple_of,
            "num_workers": self.num_workers,
        }
