"""Training DataLoaders whose position within the epoch is saved in Lightning checkpoints, so
a run resumed from a mid-epoch checkpoint trains on exactly the batches it had not seen:
:class:`ResumableDataLoader` (an order per epoch from the seed, the epoch and the role) and
:class:`ResumableShuffleLoader` (one generator whose draws continue from epoch to epoch)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader

from .seeded_loader import SeededDataLoader


class _SkipFirst:
    """A loader's index sampler (batches of indices) whose next iteration leaves out its
    first ``skip`` items; later iterations are whole again. Skipping reads indices only."""

    def __init__(self, inner) -> None:
        self.inner, self.skip = inner, 0

    def __iter__(self) -> Iterator[Any]:
        # a generator function: ``skip`` is read at the first index drawn (a worker loader
        # calls iter() twice when it starts and draws from the second)
        skip, self.skip = self.skip, 0
        yield from itertools.islice(self.inner, skip, None)

    def __len__(self) -> int:
        return len(self.inner)


class ResumableDataLoader(SeededDataLoader):
    """A :class:`SeededDataLoader` (the epoch's order is a function of the seed and the epoch,
    so a resumed run draws the same one) with ``state_dict``/``load_state_dict``
    (Lightning's stateful-loader protocol): the epoch and the number of batches handed to
    the training loop in it. A map-style dataset only."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._skipping = _SkipFirst(super()._index_sampler)
        self._yielded = 0
        self._resume_at = 0

    @property
    def _index_sampler(self):  # what DataLoader iterators draw indices from
        return self._skipping

    def __iter__(self) -> Iterator[Any]:
        # A generator: runs at the first batch, after Lightning's set_epoch on the sampler.
        start, self._resume_at = self._resume_at, 0
        self._skipping.skip = start
        self._yielded = start
        for batch in super().__iter__():
            self._yielded += 1
            yield batch

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "batches_done": self._yielded}

    def load_state_dict(self, state: dict) -> None:
        done = int(state.get("batches_done", 0))
        self._resume_at = done if done < len(self) else 0  # saved at the epoch's last batch


class ResumableShuffleLoader(DataLoader):
    """``DataLoader(dataset, shuffle=True, generator=torch.Generator().manual_seed(seed))``:
    one generator of its own, seeded once, whose draws (each epoch's order and workers' base
    seed) continue from epoch to epoch, with ``state_dict``/``load_state_dict`` (Lightning's
    stateful-loader protocol): the generator's state when the epoch began and the batches
    handed out in it (at an epoch's end: its state then, for the next epoch). A resumed run
    draws the uninterrupted run's orders. A map-style dataset only.

    Args:
        dataset: a map-style dataset.
        seed: the generator's seed.
        **kwargs: the other ``DataLoader`` arguments (not ``shuffle`` nor ``generator``).
    """

    def __init__(self, dataset, *, seed: int, **kwargs) -> None:
        super().__init__(dataset, shuffle=True,
                         generator=torch.Generator().manual_seed(int(seed)), **kwargs)
        self._skipping = _SkipFirst(super()._index_sampler)
        self._epoch_start = self.generator.get_state()
        self._yielded = 0
        self._resume: tuple | None = None

    @property
    def _index_sampler(self):  # what DataLoader iterators draw indices from
        return self._skipping

    def __iter__(self) -> Iterator[Any]:
        # a generator: runs at the first batch, after Lightning loaded a checkpoint's state
        start = 0
        if self._resume is not None:
            (state, start), self._resume = self._resume, None
            self.generator.set_state(state)
        self._epoch_start = self.generator.get_state()
        self._skipping.skip = self._yielded = start
        for batch in super().__iter__():
            self._yielded += 1
            yield batch

    def state_dict(self) -> dict:
        if self._yielded >= len(self):  # the epoch's last batch: the next epoch starts anew
            return {"generator": self.generator.get_state(), "batches_done": 0}
        return {"generator": self._epoch_start, "batches_done": self._yielded}

    def load_state_dict(self, state: dict) -> None:
        self._resume = (state["generator"], int(state["batches_done"]))
