"""A training DataLoader whose position within the epoch is saved in Lightning checkpoints, so
a run resumed from a mid-epoch checkpoint trains on exactly the batches it had not seen."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

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
