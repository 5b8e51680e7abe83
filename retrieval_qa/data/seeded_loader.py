"""A DataLoader that never draws from the global torch random-number generator.

A plain ``DataLoader`` draws its workers' base seed (and, with ``shuffle=True``, its order)
from the global generator each time an iterator is created: at every epoch's start (every
epoch with ``num_workers=0``, or non-persistent workers) and at every validation. Those draws
shift the random numbers that the model's dropout gets next, so a run resumed from a
checkpoint (whose saved random-number states a new process restores) would draw other masks
than the uninterrupted run, which made those draws at other points. :class:`SeededDataLoader`
has its own generator instead, seeded at each new iterator from ``(seed, epoch, role)``:
its order and worker seeds are a function of those three only, and the global generator is
left to the model.

With persistent workers the base seed is drawn once, when the workers start (the first
epoch of the process); the loaders of this package draw no random numbers in their workers
(the training order comes from the sampler in the main process)."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, RandomSampler


def loader_seed(seed: int, epoch: int, role: str) -> int:
    """The seed of a loader's generator for ``epoch``: a 63-bit hash of (the run's ``seed``,
    ``epoch``, ``role`` such as ``"train"`` or ``"val/questions"``).

    Args:
        seed: the run's seed.
        epoch: the epoch.
        role: the loader's role (``"train"``, ``"val/questions"``...).
    """
    words = [int(seed) % 2**64, int(epoch), zlib.crc32(role.encode())]
    return int(np.random.SeedSequence(words).generate_state(1, np.uint64)[0] >> np.uint64(1))


def current_epoch(owner: Any) -> int:
    """The epoch of the Trainer that ``owner`` (a LightningDataModule or LightningModule) is
    attached to; 0 without one.

    Args:
        owner: a LightningDataModule or LightningModule.
    """
    trainer = getattr(owner, "trainer", None)
    return int(trainer.current_epoch) if trainer is not None else 0


class SeededDataLoader(DataLoader):
    """``DataLoader(dataset, **kwargs)`` with its own ``generator`` (the workers' base seed),
    and with ``shuffle=True`` a second one for the order, reseeded with :func:`loader_seed`
    of ``(seed, current_epoch(epoch_of), role)`` at each iterator. Two generators: a new
    worker iterator draws a base seed, a reused persistent one does not, and that draw must
    not shift the order.

    The epoch is read when the first batch is drawn, not when ``iter()`` is called: Lightning
    creates the training iterator of a resumed run before it has restored the epoch counter.

    Args:
        dataset: the dataset.
        seed: the run's seed.
        role: the loader's role (``"train"``, ``"val/questions"``...).
        epoch_of: the data module whose Trainer's epoch counts; None: epoch 0.
        shuffle: draw the order from the seeded generator.
        **kwargs: the other ``DataLoader`` arguments (not ``generator``).
    """

    def __init__(self, dataset, *, seed: int, role: str, epoch_of: Any = None,
                 shuffle: bool = False, **kwargs) -> None:
        if kwargs.get("generator") is not None:
            raise ValueError("SeededDataLoader makes its own generator (from seed and role)")
        self.order = torch.Generator() if shuffle else None
        if shuffle:
            kwargs["sampler"] = RandomSampler(dataset, generator=self.order)
        super().__init__(dataset, generator=torch.Generator(), **kwargs)
        self.seed, self.role, self.epoch_of = int(seed), role, epoch_of

    @property
    def epoch(self) -> int:
        return current_epoch(self.epoch_of)

    def __iter__(self) -> Iterator[Any]:
        # a generator function: its body runs at the first batch
        self.generator.manual_seed(loader_seed(self.seed, self.epoch, self.role))
        if self.order is not None:
            self.order.manual_seed(loader_seed(self.seed, self.epoch, f"{self.role}/order"))
        yield from super().__iter__()
