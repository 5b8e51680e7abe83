"""A data module's sampling and loaders: the duplicate-free training sampler, its DDP checks,
and the training and evaluation loaders.

* Training: items ``(index, QAPair[, weight])`` batched by
  :class:`~.sampler.NoDuplicatesBatchSampler` (no question or answer text twice in a batch;
  optionally length buckets), in a :class:`~.resumable.ResumableDataLoader`. Under DDP
  (``trainer.world_size > 1``) the sampler shards duplicate-free global batches itself: the
  Trainer must be built with ``use_distributed_sampler=False``.
* Evaluation: one loader per side of a pool, items ordered longest first (little padding);
  under DDP rank ``r`` of ``w`` takes every ``w``-th item of that order, and the items'
  ``index`` lets the module reassemble the full matrices.

Every loader has its own generator, seeded from ``sampler_seed``, the epoch and its role
(:mod:`.seeded_loader`): none draws from the global torch generator, so a resumed run's
dropout draws what the uninterrupted run's did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch

from .datasets import IndexedDataset, PairDataset
from .pair_lengths import BUCKET_UNITS
from .resumable import ResumableDataLoader
from .sampler import NoDuplicatesBatchSampler
from .seeded_loader import SeededDataLoader
from .types import QAPair


@dataclass
class LoaderSettings:
    """Batches, buckets, workers and the training order's seed: the keys of that name in
    ``conf/data/reqa_squad.yaml``.

    Args:
        batch_size: training pairs per batch per process.
        eval_batch_size: texts per batch when encoding an evaluation pool.
        bucket_by_length: batches of similar length (the batch order still random).
        bucket_unit: the length of the buckets, ``tokens`` or ``chars`` (characters / 4).
        num_workers: DataLoader worker processes (0: batches cut in the main process).
        pin_memory: true, false or ``"auto"``, resolved here to whether CUDA is available.
        sampler_seed: with the epoch, fixes the training order and the loaders' generators.
    """

    batch_size: int
    eval_batch_size: int
    bucket_by_length: bool
    bucket_unit: str
    num_workers: int
    pin_memory: bool | str
    sampler_seed: int

    def __post_init__(self) -> None:
        if self.bucket_unit not in BUCKET_UNITS:
            raise ValueError(f"data.bucket_unit={self.bucket_unit!r}; expected one of "
                             f"{BUCKET_UNITS}")
        if self.pin_memory not in (True, False, "auto"):
            raise ValueError(f"data.pin_memory={self.pin_memory!r}; expected true, false or "
                             "auto")
        if self.pin_memory == "auto":
            self.pin_memory = torch.cuda.is_available()

    @classmethod
    def from_block(cls, block: Mapping) -> LoaderSettings:
        """These settings out of a ``data`` block's values (its other keys ignored).

        Args:
            block: a mapping holding (at least) every field's key.
        """
        return cls(**{f.name: block[f.name] for f in fields(cls)})


class Loaders:
    """The sampler and loaders of a data module, sharded by the attached Trainer's world.

    Args:
        settings: batches, buckets, workers and seed.
        owner: what the Trainer is attached to (a LightningDataModule: its ``trainer``
            attribute gives the world size, rank and epoch); None: one process, epoch 0.
    """

    def __init__(self, settings: LoaderSettings, owner: Any = None) -> None:
        self.settings = settings
        self.owner = owner

    @property
    def trainer(self) -> Any:
        """The owner's Trainer, None without one."""
        return getattr(self.owner, "trainer", None)

    def world(self) -> tuple[int, int]:
        """(world size, global rank) of the Trainer, (1, 0) without one."""
        trainer = self.trainer
        if trainer is None:
            return 1, 0
        return int(trainer.world_size), int(trainer.global_rank)

    def check_distributed_sampler(self) -> None:
        """Refuse a multi-process Trainer that would put its own sampler in place of the
        duplicate-free one."""
        connector = getattr(self.trainer, "_accelerator_connector", None)
        if self.world()[0] > 1 and getattr(connector, "use_distributed_sampler", False):
            raise RuntimeError("ReQADataModule shards duplicate-free batches itself: build the "
                               "Trainer with use_distributed_sampler=False")

    def train_sampler(self, pairs: Sequence[QAPair],
                      lengths: Callable[[Sequence[QAPair]], list[int]]
                      ) -> NoDuplicatesBatchSampler:
        """This rank's duplicate-free batches of ``pairs``, at the Trainer's epoch.

        Args:
            pairs: the training pairs.
            lengths: each pair's length (asked only with ``bucket_by_length``).
        """
        s = self.settings
        world, rank = self.world()
        sampler = NoDuplicatesBatchSampler(
            pairs, s.batch_size, seed=s.sampler_seed, drop_last=True,
            bucket_by_length=s.bucket_by_length,
            lengths=lengths(pairs) if s.bucket_by_length else None,
            num_replicas=world, rank=rank)
        if self.trainer is not None:
            sampler.set_epoch(self.trainer.current_epoch)
        return sampler

    def options(self, role: str) -> dict:
        """Workers, pinning, and the loader's own generator (seeded from the sampler seed,
        the epoch and ``role``: no loader draws from the global generator, which dropout
        uses; :mod:`.seeded_loader`).

        Args:
            role: the loader's role (``"train"``, ``"val/questions"``, ...).
        """
        s = self.settings
        return {"num_workers": s.num_workers, "persistent_workers": s.num_workers > 0,
                "pin_memory": s.pin_memory, "seed": s.sampler_seed, "role": role,
                "epoch_of": self.owner}

    def train_loader(self, pairs: Sequence[QAPair], weights: Sequence[float] | None,
                     batch_sampler: NoDuplicatesBatchSampler,
                     collate_fn: Callable) -> ResumableDataLoader:
        """The training loader: items ``(index, pair[, weight])`` in ``batch_sampler``'s
        batches.

        Args:
            pairs: the training pairs.
            weights: one weight per pair, or None (no ``"weight"`` in the batches).
            batch_sampler: the batches (:meth:`train_sampler`).
            collate_fn: the collator of the items.
        """
        return ResumableDataLoader(PairDataset(pairs, weights), batch_sampler=batch_sampler,
                                   collate_fn=collate_fn, **self.options("train"))

    def shard(self, lengths: Sequence[int]) -> list[int]:
        """Indices longest first (stable), this rank's strided share.

        Args:
            lengths: one length per item.
        """
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        world, rank = self.world()
        return order[rank::world]

    def eval_loader(self, values: Sequence, lengths: Sequence[int], labels: Sequence | None,
                    collate_fn: Callable, role: str) -> SeededDataLoader:
        """One side of an evaluation pool: this rank's share of ``values`` longest first,
        each item ``(index, value[, label])``.

        Args:
            values: the side's items (candidates or question texts).
            lengths: their lengths (the order).
            labels: one label per value carried into the batches, or None.
            collate_fn: the collator of the items.
            role: the loader's role (``"val/candidates"``, ...).
        """
        return SeededDataLoader(IndexedDataset(values, self.shard(lengths), labels),
                                collate_fn=collate_fn, batch_size=self.settings.eval_batch_size,
                                shuffle=False, **{**self.options(role),
                                                  "persistent_workers": False})
