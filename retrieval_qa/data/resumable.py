"""A training DataLoader whose position within the epoch is saved in Lightning checkpoints, so
a run resumed from a mid-epoch checkpoint trains on exactly the batches it had not seen."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch.utils.data import DataLoader


class ResumableDataLoader(DataLoader):
    """``state_dict``/``load_state_dict`` (Lightning's stateful-loader protocol): the epoch and
    the number of batches handed to the training loop in it. The batch sampler must offer
    ``skip_next(n)`` (:class:`~retrieval_qa.data.sampler.NoDuplicatesBatchSampler`)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._yielded = 0
        self._resume_at = 0

    def __iter__(self) -> Iterator[Any]:
        # A generator: runs at the first batch, after Lightning's set_epoch on the sampler.
        start, self._resume_at = self._resume_at, 0
        self.batch_sampler.skip_next(start)
        self._yielded = start
        for batch in super().__iter__():
            self._yielded += 1
            yield batch

    def state_dict(self) -> dict:
        return {"epoch": int(getattr(self.batch_sampler, "epoch", 0)),
                "batches_done": self._yielded}

    def load_state_dict(self, state: dict) -> None:
        done = int(state.get("batches_done", 0))
        self._resume_at = done if done < len(self) else 0  # saved at the epoch's last batch
