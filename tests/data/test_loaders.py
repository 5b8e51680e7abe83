"""The data module's sampling and loaders part alone: the settings' checks, the world read
off the owner's Trainer, the duplicate-free sampler at the Trainer's epoch, the DDP check,
and the training and evaluation loaders (their order, shards and seeded generators)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from retrieval_qa.data.loaders import Loaders, LoaderSettings
from retrieval_qa.data.sampler import NoDuplicatesBatchSampler
from retrieval_qa.data.types import QAPair

SETTINGS = LoaderSettings(batch_size=4, eval_batch_size=3, bucket_by_length=False,
                          bucket_unit="tokens", num_workers=0, pin_memory=False, sampler_seed=7)
# 24 pairs; pairs 2k and 2k+1 share a question: never in one batch
PAIRS = [QAPair(f"question {i // 2}?", f"answer {i} .", f"answer {i} .", f"q{i}", f"a{i}")
         for i in range(24)]


def owner(world: int = 1, rank: int = 0, epoch: int = 0, distributed_sampler: bool = False):
    """What a Trainer is attached to, with just the Trainer's fields the loaders read."""
    connector = SimpleNamespace(use_distributed_sampler=distributed_sampler)
    return SimpleNamespace(trainer=SimpleNamespace(
        world_size=world, global_rank=rank, current_epoch=epoch,
        _accelerator_connector=connector))


def indices(items):
    return [int(it[0]) for it in items]


def test_settings_are_checked_and_pinning_resolved():
    with pytest.raises(ValueError, match="bucket_unit='words'"):
        replace(SETTINGS, bucket_unit="words")
    with pytest.raises(ValueError, match="pin_memory='yes'"):
        replace(SETTINGS, pin_memory="yes")
    assert replace(SETTINGS, pin_memory="auto").pin_memory in (True, False)


def test_the_world_comes_from_the_owners_trainer():
    assert Loaders(SETTINGS).world() == (1, 0)
    assert Loaders(SETTINGS, SimpleNamespace(trainer=None)).world() == (1, 0)
    assert Loaders(SETTINGS, owner(world=4, rank=2)).world() == (4, 2)
    Loaders(SETTINGS, owner(world=1, distributed_sampler=True)).check_distributed_sampler()
    Loaders(SETTINGS, owner(world=2)).check_distributed_sampler()
    with pytest.raises(RuntimeError, match="use_distributed_sampler=False"):
        Loaders(SETTINGS, owner(world=2, distributed_sampler=True)).check_distributed_sampler()


def test_the_sampler_is_the_duplicate_free_one_at_the_trainers_epoch():
    asked = []

    def lengths(pairs):
        asked.append(len(pairs))
        return [len(p.answer) for p in pairs]

    sampler = Loaders(SETTINGS, owner(epoch=3)).train_sampler(PAIRS, lengths)
    expected = NoDuplicatesBatchSampler(PAIRS, 4, seed=7, drop_last=True)
    expected.set_epoch(3)
    assert list(sampler) == list(expected) and sampler.epoch == 3 and asked == []
    bucketed = replace(SETTINGS, bucket_by_length=True)
    Loaders(bucketed).train_sampler(PAIRS, lengths)
    assert asked == [24]  # lengths asked only for the buckets
    shards = [list(Loaders(SETTINGS, owner(2, r)).train_sampler(PAIRS, lengths)) for r in (0, 1)]
    for b0, b1 in zip(*shards, strict=True):  # a global batch of 8, no question twice
        assert len(b0) == len(b1) == 4
        assert len({PAIRS[i].question for i in b0 + b1}) == 8


def test_the_training_loader_carries_the_weights_in_the_samplers_batches():
    loaders = Loaders(SETTINGS, owner(epoch=1))
    sampler = loaders.train_sampler(PAIRS, lambda pairs: [])
    weights = [float(i) for i in range(len(PAIRS))]
    loader = loaders.train_loader(PAIRS, weights, sampler, collate_fn=list)
    batches = list(loader)
    assert [indices(b) for b in batches] == list(sampler)
    assert all(w == float(i) for b in batches for i, _, w in b)
    assert all(len(item) == 2 for b in loaders.train_loader(PAIRS, None, sampler, list)
               for item in b)
    options = loaders.options("val/questions")
    assert (options["seed"], options["role"], options["persistent_workers"]) == (7, "val/questions",
                                                                              False)


def test_evaluation_loaders_go_longest_first_and_shard_by_rank():
    values = [f"text {i}" for i in range(10)]
    lengths = [3, 9, 1, 9, 5, 2, 8, 7, 4, 6]
    order = [1, 3, 6, 7, 9, 4, 8, 0, 5, 2]  # longest first, ties in list order
    assert Loaders(SETTINGS).shard(lengths) == order
    one = Loaders(SETTINGS).eval_loader(values, lengths, None, list, "test/questions")
    batches = list(one)
    assert [len(b) for b in batches] == [3, 3, 3, 1]  # eval_batch_size
    assert [i for b in batches for i in indices(b)] == order
    shards = []
    for rank in (0, 1):
        loader = Loaders(SETTINGS, owner(2, rank)).eval_loader(
            values, lengths, [f"label {i}" for i in range(10)], list, "test/questions")
        items = [it for b in loader for it in b]
        assert all(label == f"label {i}" for i, _, label in items)
        shards.append(indices(items))
    assert shards == [order[0::2], order[1::2]]
