"""The LightningDataModule every method trains and validates with.

Pools: the training pool (``train_dataset/train_pool``) is split 9:1 with
:func:`train_val_split` (no question or answer sentence on both sides); the training part
gives the training pairs, the other part is the validation pool. The test pool is
``test_dataset/test_pool``. Optional caps take deterministic subsets (seeded by
``split_seed``): ``max_train_pairs`` of the training pairs, ``max_val_questions`` of the
validation questions and ``max_test_questions`` of the test questions (each with the sentences
of their paragraphs as candidates; the test cap is for quick checks, never a reported result).

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
import torch
from omegaconf import DictConfig
from torch.utils.data import DataLoader

from ..registry import config_values
from .caps import cap_pairs, cap_questions
from .collate import PairCollator, TextCollator, first_copies, token_lengths
from .datasets import IndexedDataset, PairDataset
from .features import FeatureTable
from .loading import load_pool
from .pair_lengths import BUCKET_UNITS, pair_lengths
from .pair_sources import PairSource
from .pool_index import doc_index
from .resumable import ResumableDataLoader
from .sampler import NoDuplicatesBatchSampler
from .seeded_loader import SeededDataLoader
from .split import train_val_split
from .tokenized import TokenizedTexts
from .types import QAPair, RetrievalPool


class ReQADataModule(pl.LightningDataModule):
    """See the module docstring. The keyword arguments are the keys of
    ``conf/data/reqa_squad.yaml``, their one source (:meth:`from_config`); ``tokenizer``
    is a Hugging Face tokenizer; ``sampler_seed`` with the epoch fixes the training order."""

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
        if features is not None and not isinstance(features, FeatureTable):
            features = FeatureTable.load(features)
        self.features = features
        self.tokenizer = features if features is not None else tokenizer
        self.train_dataset, self.train_pool_name = train_dataset, train_pool
        self.test_dataset, self.test_pool_name = test_dataset, test_pool
        self.data_dir = data_dir
        self.val_fraction, self.split_seed = val_fraction, split_seed
        self.max_train_pairs, self.max_val_questions = max_train_pairs, max_val_questions
        self.max_test_questions = max_test_questions
        self.max_question_length, self.max_answer_length = max_question_length, max_answer_length
        self.answer_with_context = answer_with_context
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.bucket_by_length = bucket_by_length
        if bucket_unit not in BUCKET_UNITS:
            raise ValueError(f"data.bucket_unit={bucket_unit!r}; expected one of {BUCKET_UNITS}")
        self.bucket_unit = bucket_unit
        self.num_workers = num_workers
        if pin_memory not in (True, False, "auto"):
            raise ValueError(f"data.pin_memory={pin_memory!r}; expected true, false or auto")
        self.pin_memory = torch.cuda.is_available() if pin_memory == "auto" else pin_memory
        if pad_to_multiple_of is not None and int(pad_to_multiple_of) < 1:
            raise ValueError(f"data.pad_to_multiple_of={pad_to_multiple_of!r}; expected null "
                             "or a positive number of tokens")
        self.pad_to_multiple_of = pad_to_multiple_of
        self._token_memo: dict = {}
        self.sampler_seed = sampler_seed
        self.train_weights: list[float] | None = None
        self.pair_sources: list[PairSource] = [PairSource.from_config(c) for c in extra_pairs or []]
        self._split_pairs: list[QAPair] | None = None
        self._train_pairs: list[QAPair] | None = None
        self._val_pool: RetrievalPool | None = None
        self._test_pool: RetrievalPool | None = None
        self._test_questions = 0   # questions of the test pool before max_test_questions
        self._info: dict[str, Any] = {}

    @classmethod
    def from_config(cls, cfg: DictConfig | dict, tokenizer, **overrides) -> ReQADataModule:
        """Build from the ``data`` config (interpolations resolved); ``overrides`` win. An
        unknown key is an error naming it."""
        values = config_values(cfg)
        values.update(overrides)
        try:
            return cls(tokenizer, **values)
        except TypeError as e:
            raise TypeError(f"data config: {e} (keys: {sorted(values)})") from e

    # ---- pools --------------------------------------------------------------------------
    def _load(self, dataset: str, pool: str) -> tuple[RetrievalPool, dict]:
        return load_pool(dataset, pool, data_dir=self.data_dir)

    def _setup_train(self) -> None:
        if self._split_pairs is not None:
            return
        pool, notes = self._load(self.train_dataset, self.train_pool_name)
        train, val = train_val_split(pool, self.val_fraction, self.split_seed)
        capped_train = cap_pairs(train, self.max_train_pairs, self.split_seed)
        capped_val = cap_questions(val, self.max_val_questions, self.split_seed)
        self._split_pairs, self._val_pool = capped_train, capped_val
        self._merge_sources()
        self._info["train"] = {
            "dataset": pool.dataset, "pool": pool.pool, "source": pool.source,
            "pool_pairs": len(pool.pairs), "split_pairs": len(train),
            "pairs": len(capped_train), "max_train_pairs": self.max_train_pairs,
            "capped": len(capped_train) < len(train),
            "answers_outside_sentences": notes.get("answers_outside_sentences"),
        }
        self._info["val"] = {
            "dataset": val.dataset, "pool": val.pool, "question_unit": val.question_unit,
            "split_questions": len(val.questions),
            "questions": len(capped_val.questions), "candidates": len(capped_val.candidates),
            "pairs": len(capped_val.pairs), "max_val_questions": self.max_val_questions,
            "capped": len(capped_val.questions) < len(val.questions),
        }

    @property
    def train_pairs(self) -> list[QAPair]:
        self._setup_train()
        return self._train_pairs

    @property
    def val_pool(self) -> RetrievalPool:
        self._setup_train()
        return self._val_pool

    @property
    def test_pool(self) -> RetrievalPool:
        """Loaded on first use (also after ``fit``, without ``setup("test")``)."""
        if self._test_pool is None:
            pool, _ = self._load(self.test_dataset, self.test_pool_name)
            self._test_pool = cap_questions(pool, self.max_test_questions, self.split_seed)
            self._test_questions = len(pool.questions)
        return self._test_pool

    def setup(self, stage: str | None = None) -> None:
        if stage in (None, "fit", "validate"):
            self._setup_train()
        if stage in (None, "test"):
            _ = self.test_pool
        if self.features is not None:
            if stage in (None, "fit", "validate"):
                pairs = self.train_pairs
                self.features.check_covers((p.question for p in pairs), "training question")
                self.features.check_covers((p.answer for p in pairs), "training answer")
                self.features.check_covers(self.val_pool.questions, "validation question")
                self.features.check_covers((c.text for c in self.val_pool.candidates),
                                           "validation candidate")
            if stage in (None, "test"):
                self.features.check_covers(self.test_pool.questions, "test question")
                self.features.check_covers((c.text for c in self.test_pool.candidates),
                                           "test candidate")

    # ---- extra pair sources (e.g. mined pairs with weights) -----------------------------
    def add_pair_source(self, name: str, pairs: Sequence[QAPair],
                        weights: Sequence[float] | None = None) -> None:
        """More training pairs, each with a weight (default 1) carried into batches as
        ``"weight"``; the split's own pairs weigh 1. Takes effect at the next
        ``train_dataloader()``."""
        self.pair_sources.append(PairSource(name, list(pairs), weights))
        if self._split_pairs is not None:
            self._merge_sources()

    def _merge_sources(self) -> None:
        """Training pairs = the split's pairs + every source's, minus source pairs whose
        question or answer text is in the validation pool (counted per source)."""
        pairs = list(self._split_pairs)
        if not self.pair_sources:
            self._train_pairs = pairs
            return
        weights = [1.0] * len(pairs)
        val = self._val_pool
        val_q, val_a = set(val.questions), {c.text for c in val.candidates}
        report = []
        for source in self.pair_sources:
            kept = [(p, w) for p, w in zip(source.pairs, source.weights(), strict=True)
                    if p.question not in val_q and p.answer not in val_a]
            pairs += [p for p, _ in kept]
            weights += [w for _, w in kept]
            report.append({"name": source.name, "pairs": len(source.pairs), "kept": len(kept),
                           "dropped_validation_overlap": len(source.pairs) - len(kept)})
        self._train_pairs, self.train_weights = pairs, weights
        self._info["extra_pairs"] = report

    def set_train_weights(self, weights: Sequence[float] | None) -> None:
        """Per-pair weights (aligned with :attr:`train_pairs`), carried into batches as
        ``"weight"``; None removes them. Takes effect at the next ``train_dataloader()``."""
        if weights is not None and len(weights) != len(self.train_pairs):
            raise ValueError(f"{len(weights)} weights for {len(self.train_pairs)} training pairs")
        self.train_weights = None if weights is None else [float(w) for w in weights]

    # ---- loaders ------------------------------------------------------------------------
    def _world(self) -> tuple[int, int]:
        """(world size, global rank) from the attached trainer, (1, 0) without one."""
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return 1, 0
        return int(trainer.world_size), int(trainer.global_rank)

    # ---- token ids, computed once per text list ----------------------------------------
    @property
    def pretokenized(self) -> bool:
        """Batches are cut from ids tokenised beforehand (any tokenizer; frozen features
        have no tokens)."""
        return self.features is None

    def _memo(self, owner, build):
        """``build()`` once per ``owner`` (a pool or a pair list, kept alive here so its id is
        not reused) for the life of the module; TokenizedTexts also caches on disk."""
        if id(owner) not in self._token_memo:
            self._token_memo[id(owner)] = (owner, build())
        return self._token_memo[id(owner)][1]

    def _pool_tokens(self, pool: RetrievalPool) -> tuple[TokenizedTexts, TokenizedTexts]:
        """(candidates, questions) of ``pool`` as :class:`TokenizedTexts`."""
        def build():
            contexts = ([c.context for c in pool.candidates] if self.answer_with_context
                        else None)
            return (TokenizedTexts.build(self.tokenizer, [c.text for c in pool.candidates],
                                         self.max_answer_length, contexts),
                    TokenizedTexts.build(self.tokenizer, pool.questions,
                                         self.max_question_length))
        return self._memo(pool, build)

    def _pair_tokens(self, pairs: Sequence[QAPair]) -> tuple[TokenizedTexts, TokenizedTexts]:
        """(questions, answers) of the training pairs as :class:`TokenizedTexts`."""
        def build():
            contexts = [p.context for p in pairs] if self.answer_with_context else None
            return (TokenizedTexts.build(self.tokenizer, [p.question for p in pairs],
                                         self.max_question_length),
                    TokenizedTexts.build(self.tokenizer, [p.answer for p in pairs],
                                         self.max_answer_length, contexts))
        return self._memo(pairs, build)

    def pair_lengths(self, pairs: Sequence[QAPair]) -> list[int]:
        """:func:`pair_lengths` with this module's tokenizer, lengths and unit (token counts
        read off the pre-tokenised ids: the same numbers)."""
        if self.bucket_unit == "tokens" and self.pretokenized:
            q, a = self._pair_tokens(pairs)
            return [x + y for x, y in zip(q.lengths(), a.lengths(), strict=True)]
        return pair_lengths(pairs, self.tokenizer, self.max_question_length,
                            self.max_answer_length, self.bucket_unit, self.answer_with_context)

    def train_sampler(self) -> NoDuplicatesBatchSampler:
        pairs = self.train_pairs
        world, rank = self._world()
        sampler = NoDuplicatesBatchSampler(
            pairs, self.batch_size, seed=self.sampler_seed, drop_last=True,
            bucket_by_length=self.bucket_by_length,
            lengths=self.pair_lengths(pairs) if self.bucket_by_length else None,
            num_replicas=world, rank=rank)
        trainer = getattr(self, "trainer", None)
        if trainer is not None:
            sampler.set_epoch(trainer.current_epoch)
        return sampler

    def _check_distributed_sampler(self) -> None:
        trainer = getattr(self, "trainer", None)
        connector = getattr(trainer, "_accelerator_connector", None)
        if self._world()[0] > 1 and getattr(connector, "use_distributed_sampler", False):
            raise RuntimeError("ReQADataModule shards duplicate-free batches itself: build the "
                               "Trainer with use_distributed_sampler=False")

    def train_dataloader(self) -> DataLoader:
        self._check_distributed_sampler()
        pairs = self.train_pairs
        dataset = PairDataset(pairs, self.train_weights)
        return ResumableDataLoader(
            dataset, batch_sampler=self.train_sampler(),
            collate_fn=PairCollator(self.tokenizer, self.max_question_length,
                                    self.max_answer_length, self.answer_with_context,
                                    self._pair_tokens(pairs) if self.pretokenized else None,
                                    self.pad_to_multiple_of),
            **self._loader_options("train"))

    def _loader_options(self, role: str) -> dict:
        """Workers, pinning, and the loader's own generator (seeded from the sampler seed,
        the epoch and ``role``: no loader draws from the global generator, which dropout
        uses; :mod:`.seeded_loader`)."""
        return {"num_workers": self.num_workers, "persistent_workers": self.num_workers > 0,
                "pin_memory": self.pin_memory, "seed": self.sampler_seed, "role": role,
                "epoch_of": self}

    def _shard(self, lengths: list[int]) -> list[int]:
        """Indices longest first (stable), this rank's strided share."""
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        world, rank = self._world()
        return order[rank::world]

    def _eval_loaders(self, pool: RetrievalPool, stage: str) -> list[DataLoader]:
        texts = [c.text for c in pool.candidates]
        contexts = [c.context for c in pool.candidates] if self.answer_with_context else None
        cand_tokens = q_tokens = None
        if self.pretokenized:
            cand_tokens, q_tokens = self._pool_tokens(pool)
            cand_len, q_len = cand_tokens.lengths(), q_tokens.lengths()
        else:
            cand_len = token_lengths(self.tokenizer, texts, self.max_answer_length, contexts)
            q_len = token_lengths(self.tokenizer, pool.questions, self.max_question_length)
        def loader(dataset, collate_fn, side: str) -> DataLoader:
            return SeededDataLoader(dataset, collate_fn=collate_fn, batch_size=self.eval_batch_size,
                                    shuffle=False, **{**self._loader_options(f"{stage}/{side}"),
                                                      "persistent_workers": False})

        # a candidate's labels: its document, and the first candidate with its encoder input
        labels = list(zip(doc_index(pool)[0].tolist(), first_copies(texts, contexts),
                          strict=True))
        candidates = loader(
            IndexedDataset(pool.candidates, self._shard(cand_len), labels),
            TextCollator(self.tokenizer, self.max_answer_length, "answer",
                         self.answer_with_context, cand_tokens, self.pad_to_multiple_of),
            "candidates")
        questions = loader(
            IndexedDataset(pool.questions, self._shard(q_len), pool.gold),
            TextCollator(self.tokenizer, self.max_question_length, "question", tokens=q_tokens,
                         pad_to_multiple_of=self.pad_to_multiple_of),
            "questions")
        return [candidates, questions]

    def val_dataloader(self) -> list[DataLoader]:
        return self._eval_loaders(self.val_pool, "val")

    def test_dataloader(self) -> list[DataLoader]:
        return self._eval_loaders(self.test_pool, "test")

    # ---- report -------------------------------------------------------------------------
    def describe(self) -> dict:
        """Counts, caps and pools used, for the run's JSON output."""
        self._setup_train()
        test = {"dataset": self.test_dataset, "pool": self.test_pool_name}
        if self._test_pool is not None:
            test.update(question_unit=self._test_pool.question_unit,
                        questions=len(self._test_pool.questions),
                        candidates=len(self._test_pool.candidates),
                        source=self._test_pool.source)
            if self.max_test_questions is not None:
                test.update(max_test_questions=self.max_test_questions,
                            capped=len(self._test_pool.questions) < self._test_questions)
        world = self._world()[0]
        return {
            **self._info, "test": test,
            "split": {"val_fraction": self.val_fraction, "seed": self.split_seed},
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
