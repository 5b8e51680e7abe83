"""NoDuplicatesBatchSampler: duplicate-free batches, each pair at most once per epoch,
determinism per (seed, epoch), exact len(), DDP slicing of global batches, length bucketing."""

from __future__ import annotations

import random

import pytest

from retrieval_qa.data.sampler import NoDuplicatesBatchSampler
from retrieval_qa.data.types import QAPair


def make_pairs(n_answers: int = 60, seed: int = 0) -> list[QAPair]:
    """A pool where answer 0 has 17 questions, some answers have 2-4 questions, and some
    questions have two answer sentences (same question text in two pairs)."""
    rng = random.Random(seed)
    pairs = []
    for q in range(17):
        pairs.append(QAPair(f"question about the big answer {q}?", "The big answer.", "ctx0",
                            f"big{q}", "a0"))
    for a in range(1, n_answers):
        for k in range(rng.choice([1, 1, 1, 2, 4])):
            pairs.append(QAPair(f"question {a}-{k}?", f"Answer sentence {a}.", f"ctx{a}",
                                f"q{a}-{k}", f"a{a}"))
    for a in range(1, n_answers, 7):  # the same question text with a second answer sentence
        pairs.append(QAPair(f"question {a}-0?", f"Second answer {a}.", f"ctx{a}",
                            f"q{a}-0", f"b{a}"))
    return pairs


def mixed_lengths(n: int, seed: int = 1) -> list[int]:
    rng = random.Random(seed)
    return [rng.choice([rng.randint(5, 15), rng.randint(40, 90), rng.randint(150, 200)])
            for _ in range(n)]


def assert_duplicate_free(pairs: list[QAPair], batch: list[int]) -> None:
    questions = [pairs[i].question for i in batch]
    answers = [pairs[i].answer for i in batch]
    assert len(set(questions)) == len(questions), questions
    assert len(set(answers)) == len(answers), answers


def epoch_batches(sampler: NoDuplicatesBatchSampler, epoch: int) -> list[list[int]]:
    sampler.set_epoch(epoch)
    return list(sampler)


@pytest.mark.parametrize("bucket", [False, True])
@pytest.mark.parametrize("drop_last", [True, False])
def test_no_duplicates_and_each_pair_at_most_once(bucket, drop_last):
    pairs = make_pairs(n_answers=400)  # ~48 batches of 16: room to spread 17 questions
    lengths = mixed_lengths(len(pairs))
    for seed in range(4):
        sampler = NoDuplicatesBatchSampler(pairs, 16, seed=seed, drop_last=drop_last,
                                           bucket_by_length=bucket, lengths=lengths,
                                           bucket_chunk_batches=3)
        for epoch in range(4):
            batches = epoch_batches(sampler, epoch)
            for b in batches:
                assert_duplicate_free(pairs, b)
            used = [i for b in batches for i in b]
            assert len(used) == len(set(used))
            if drop_last:
                assert all(len(b) == 16 for b in batches)
                assert len(batches) == len(pairs) // 16
            else:  # deferred pairs are placed later, never dropped
                assert sorted(used) == list(range(len(pairs)))
                sizes = [len(b) for b in batches]
                assert sizes[:len(pairs) // 16] == [16] * (len(pairs) // 16)
                assert sizes == sorted(sizes, reverse=True)  # only the tail is incomplete


def test_degenerate_pool_defers_to_tail_batches():
    """~8 batches cannot hold 17 questions of one answer: the rest go to (small) tail
    batches, still duplicate-free, and drop_last=False uses every pair once."""
    pairs = make_pairs()
    sampler = NoDuplicatesBatchSampler(pairs, 16, seed=3, drop_last=False)
    batches = list(sampler)
    for b in batches:
        assert_duplicate_free(pairs, b)
    assert sorted(i for b in batches for i in b) == list(range(len(pairs)))
    sizes = [len(b) for b in batches]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] == 16 and sizes[-1] < 16


def test_deterministic_per_seed_and_epoch_and_different_across_epochs():
    pairs = make_pairs()
    a = NoDuplicatesBatchSampler(pairs, 8, seed=5)
    b = NoDuplicatesBatchSampler(pairs, 8, seed=5)
    assert epoch_batches(a, 0) == epoch_batches(b, 0)
    assert epoch_batches(a, 3) == epoch_batches(b, 3)
    assert epoch_batches(a, 0) != epoch_batches(a, 1)
    assert epoch_batches(a, 1) == epoch_batches(NoDuplicatesBatchSampler(pairs, 8, seed=5), 1)
    assert epoch_batches(NoDuplicatesBatchSampler(pairs, 8, seed=6), 0) != epoch_batches(a, 0)


def test_no_shuffle_keeps_order():
    pairs = [QAPair(f"q{i}", f"a{i}", "c", f"q{i}", f"a{i}") for i in range(10)]
    sampler = NoDuplicatesBatchSampler(pairs, 4, shuffle=False, drop_last=False)
    assert list(sampler) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_clashing_pair_is_deferred_not_dropped():
    pairs = [QAPair("q0", "same", "c", "q0", "s"), QAPair("q1", "same", "c", "q1", "s"),
             QAPair("q2", "a2", "c", "q2", "a2"), QAPair("q3", "a3", "c", "q3", "a3")]
    sampler = NoDuplicatesBatchSampler(pairs, 2, shuffle=False, drop_last=True)
    assert list(sampler) == [[0, 2], [1, 3]]


@pytest.mark.parametrize("kwargs", [
    {"batch_size": 16}, {"batch_size": 16, "drop_last": False},
    {"batch_size": 7, "bucket_by_length": True, "drop_last": False},
    {"batch_size": 5, "num_replicas": 2, "rank": 1, "drop_last": False},
    {"batch_size": 5, "num_replicas": 3, "rank": 0, "bucket_by_length": True},
])
def test_len_matches_batches_yielded(kwargs):
    pairs = make_pairs()
    sampler = NoDuplicatesBatchSampler(pairs, seed=2, lengths=mixed_lengths(len(pairs)),
                                       **kwargs)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        assert len(sampler) == len(list(sampler))


@pytest.mark.parametrize("drop_last", [True, False])
@pytest.mark.parametrize("bucket", [False, True])
def test_ddp_slices_of_duplicate_free_global_batches(drop_last, bucket):
    pairs = make_pairs()
    lengths = mixed_lengths(len(pairs))
    for epoch in range(3):
        ranks = [epoch_batches(NoDuplicatesBatchSampler(
            pairs, 6, seed=1, drop_last=drop_last, bucket_by_length=bucket, lengths=lengths,
            num_replicas=2, rank=r), epoch) for r in range(2)]
        assert len(ranks[0]) == len(ranks[1]) > 0
        for b0, b1 in zip(*ranks, strict=True):
            assert len(b0) == len(b1)  # one shape per step, so all_gather works
            assert not set(b0) & set(b1)
            assert_duplicate_free(pairs, b0 + b1)  # the gathered global batch
        used = [i for r in ranks for b in r for i in b]
        assert len(used) == len(set(used))  # each pair once per epoch across ranks
        if drop_last:
            assert all(len(b) == 6 for b in ranks[0])


def test_ddp_needs_valid_rank():
    with pytest.raises(ValueError):
        NoDuplicatesBatchSampler(make_pairs(), 4, num_replicas=2, rank=2)


def test_bucketing_needs_lengths():
    pairs = make_pairs()
    with pytest.raises(ValueError, match="lengths"):
        NoDuplicatesBatchSampler(pairs, 4, bucket_by_length=True)
    with pytest.raises(ValueError, match="lengths"):
        NoDuplicatesBatchSampler(pairs, 4, bucket_by_length=True, lengths=[1, 2])


def padding(batches: list[list[int]], lengths: list[int]) -> int:
    return sum(max(lengths[i] for i in b) * len(b) - sum(lengths[i] for i in b)
               for b in batches)


def test_bucketing_reduces_padding_and_keeps_batch_order_random():
    pairs = make_pairs(n_answers=400)
    lengths = mixed_lengths(len(pairs))
    plain = NoDuplicatesBatchSampler(pairs, 16, seed=0, lengths=lengths)
    bucketed = NoDuplicatesBatchSampler(pairs, 16, seed=0, bucket_by_length=True,
                                        lengths=lengths, bucket_chunk_batches=10)
    plain_pad = padding(list(plain), lengths)
    bucket_batches = list(bucketed)
    assert padding(bucket_batches, lengths) < 0.5 * plain_pad
    longest = [max(lengths[i] for i in b) for b in bucket_batches]
    assert longest != sorted(longest) and longest != sorted(longest, reverse=True)
    for b in bucket_batches:
        assert_duplicate_free(pairs, b)


def test_lightning_epoch_hook_reaches_the_batch_sampler():
    """Lightning calls set_epoch on ``dataloader.batch_sampler.sampler``."""
    from lightning_fabric.utilities.data import _set_sampler_epoch
    from torch.utils.data import DataLoader

    pairs = make_pairs()
    sampler = NoDuplicatesBatchSampler(pairs, 8, seed=1)
    loader = DataLoader(list(range(len(pairs))), batch_sampler=sampler, collate_fn=list)
    _set_sampler_epoch(loader, 4)
    assert sampler.epoch == 4
    assert list(sampler.sampler) == [i for b in sampler for i in b]
    assert len(sampler.sampler) == 8 * len(sampler)
