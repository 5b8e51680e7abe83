"""Loaders with their own generators (retrieval_qa/data/seeded_loader.py) and the resumable
training loader (retrieval_qa/data/resumable.py): no draw from the global torch generator,
an order that is a function of (seed, epoch, role), and a mid-epoch position that a new loader
resumes from, with worker processes too."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from retrieval_qa.data.resumable import ResumableDataLoader
from retrieval_qa.data.seeded_loader import SeededDataLoader, loader_seed


def _owner(epoch: int) -> SimpleNamespace:
    """Stands for a data module attached to a Trainer at ``epoch``."""
    return SimpleNamespace(trainer=SimpleNamespace(current_epoch=epoch))


def _order(loader) -> list[list[int]]:
    return [batch.tolist() for batch in loader]


@pytest.mark.parametrize("workers", [0, 2])
def test_iterating_draws_nothing_from_the_global_generator(workers):
    loader = SeededDataLoader(list(range(20)), batch_size=4, shuffle=True, num_workers=workers,
                              seed=1, role="train", epoch_of=_owner(0))
    torch.manual_seed(0)
    before = torch.get_rng_state()
    _order(loader)
    assert torch.equal(torch.get_rng_state(), before)


def test_the_order_is_a_function_of_seed_epoch_and_role():
    def order(seed=1, epoch=0, role="train"):
        return _order(SeededDataLoader(list(range(20)), batch_size=4, shuffle=True, seed=seed,
                                       role=role, epoch_of=_owner(epoch)))

    assert order() == order()
    assert order() != order(epoch=1) and order() != order(seed=2) and order() != order(role="x")
    owner = _owner(0)
    loader = SeededDataLoader(list(range(20)), batch_size=4, shuffle=True, seed=1, role="train",
                              epoch_of=owner)
    first = _order(loader)
    owner.trainer.current_epoch = 1  # read when the first batch is drawn
    assert _order(loader) == order(epoch=1) and first == order()
    assert loader_seed(1, 0, "train") != loader_seed(1, 0, "val")


@pytest.mark.parametrize("workers", [0, 2])
def test_a_new_loader_resumes_mid_epoch_at_the_saved_position(workers):
    def loader():
        return ResumableDataLoader(list(range(24)), batch_size=4, shuffle=True,
                                   num_workers=workers, persistent_workers=workers > 0,
                                   seed=3, role="train", epoch_of=_owner(1))

    full = _order(loader())
    first = loader()
    batches = iter(first)
    seen = [next(batches).tolist() for _ in range(2)]
    state = first.state_dict()
    assert state == {"epoch": 1, "batches_done": 2}
    resumed = loader()  # a new process's loader
    resumed.load_state_dict(state)
    assert seen + _order(resumed) == full
    assert _order(resumed) == full  # the next epoch is whole
