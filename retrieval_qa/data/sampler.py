"""Batch sampler for in-batch-negative training: no batch holds the same answer sentence text
or the same question text twice.

A SQuAD answer sentence can be the gold of up to 17 questions; if two of its pairs sat in one
batch, each would be scored as a negative of the other (a false in-batch negative). The
sampler walks the epoch's order and fills batches greedily; a pair that clashes with the batch
being filled is *deferred* (tried first for the next batches), never dropped, so every pair is
used at most once per epoch and, except for the tail governed by ``drop_last``, exactly once.

Distributed training (``num_replicas > 1``): when the loss gathers embeddings across
processes, the batches of all ranks at one step form one softmax, so duplicates *across*
ranks would be false negatives too. The sampler therefore builds one *global* sequence of
duplicate-free batches of ``batch_size * num_replicas`` pairs (identical on every rank: same
seed and epoch) and rank ``r`` takes the slice ``[r * batch_size, (r + 1) * batch_size)`` of
each. Every rank gets the same number of batches of the same size at every step, the ranks'
slices are disjoint, and their union is duplicate-free. A trailing incomplete global batch
(``drop_last=False`` only) of ``m`` pairs is cut into ``num_replicas`` equal slices of
``m // num_replicas`` pairs (up to ``num_replicas - 1`` pairs of it are left out, and it is
skipped when ``m < num_replicas``), so gathered tensors keep one shape across ranks.

Length bucketing (``bucket_by_length=True``, needs ``lengths``): the shuffled order is cut
into chunks of ``bucket_chunk_batches`` global batches, each chunk is sorted by length, the
batches are formed, and the full batches are shuffled, so a batch holds pairs of similar
length (little padding) while the order of batches stays random.

Determinism: the order is a function of ``(seed, epoch)`` only; call :meth:`set_epoch`
before each epoch, as with ``DistributedSampler``. Lightning calls ``set_epoch`` on
``dataloader.sampler`` and ``dataloader.batch_sampler.sampler`` (not on the batch sampler
itself), so the batch sampler exposes ``.sampler``, a view of this rank's indices whose
``set_epoch`` forwards to it.

``len()`` is exact for the current epoch: it runs the (cheap, cached) construction. It is
``floor(N / global_batch)`` (``drop_last=True``) or ``ceil(N / global_batch)`` plus the number
of extra tail batches that clashing deferred pairs need (``drop_last=False``), and in a real
pool it is the same every epoch. Only a degenerate pool (one answer shared by a large share
of all pairs) can make the count differ between epochs; Lightning fixes the epoch length from
the first epoch, and an epoch that yields fewer batches simply ends early.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from .types import QAPair


class _EpochView:
    """``batch_sampler.sampler``: this rank's indices of the epoch, flattened; ``set_epoch``
    forwards to the batch sampler (the attribute Lightning calls at each epoch start)."""

    def __init__(self, owner: NoDuplicatesBatchSampler) -> None:
        self.owner = owner

    def set_epoch(self, epoch: int) -> None:
        self.owner.set_epoch(epoch)

    def __iter__(self) -> Iterator[int]:
        for batch in self.owner:
            yield from batch

    def __len__(self) -> int:
        return sum(len(self.owner._shard(b)) for b in self.owner.global_batches())


class NoDuplicatesBatchSampler:
    """Yields lists of indices into ``pairs`` (this rank's share of each global batch).

    Args:
        pairs: the training pairs; only ``question`` and ``answer`` texts are read.
        batch_size: pairs per batch *per rank*; the global batch is
            ``batch_size * num_replicas``.
        seed: with the epoch, fixes the order.
        drop_last: drop the trailing incomplete batch(es) of the epoch.
        bucket_by_length: sort within chunks by ``lengths`` (see the module docstring).
        lengths: one length per pair (e.g. estimated question + answer tokens), for bucketing.
        shuffle: shuffle the pairs (and, with bucketing, the batches) each epoch.
        num_replicas: the ranks of distributed training (see the module docstring).
        rank: this process's rank, in ``[0, num_replicas)``.
        bucket_chunk_batches: chunk size of the length sort, in global batches.
    """

    def __init__(self, pairs: Sequence[QAPair], batch_size: int, seed: int = 0,
                 drop_last: bool = True, bucket_by_length: bool = False,
                 lengths: Sequence[int] | None = None, shuffle: bool = True,
                 num_replicas: int = 1, rank: int = 0, bucket_chunk_batches: int = 50) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"need num_replicas >= 1 and 0 <= rank < num_replicas, got "
                             f"num_replicas={num_replicas}, rank={rank}")
        if bucket_by_length:
            if lengths is None:
                raise ValueError("bucket_by_length=True needs one length per pair (lengths=...)")
            if len(lengths) != len(pairs):
                raise ValueError(f"{len(lengths)} lengths for {len(pairs)} pairs")
        self.batch_size = batch_size
        self.seed = seed
        self.drop_last = drop_last
        self.bucket_by_length = bucket_by_length
        self.shuffle = shuffle
        self.num_replicas = num_replicas
        self.rank = rank
        self.bucket_chunk_batches = bucket_chunk_batches
        self.epoch = 0
        # Texts as small integer ids: the set look-ups of the greedy fill stay cheap.
        q_ids: dict[str, int] = {}
        a_ids: dict[str, int] = {}
        self._q = [q_ids.setdefault(p.question, len(q_ids)) for p in pairs]
        self._a = [a_ids.setdefault(p.answer, len(a_ids)) for p in pairs]
        self._lengths = np.asarray(lengths, dtype=np.int64) if lengths is not None else None
        self._cache: tuple[int, list[list[int]]] | None = None
        self.sampler = _EpochView(self)

    @property
    def global_batch_size(self) -> int:
        return self.batch_size * self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    # ---- construction ---------------------------------------------------------------------
    def _order(self, rng: np.random.Generator) -> list[int]:
        n = len(self._q)
        order = rng.permutation(n) if self.shuffle else np.arange(n)
        if self.bucket_by_length:
            chunk = max(1, self.bucket_chunk_batches * self.global_batch_size)
            parts = [order[lo:lo + chunk] for lo in range(0, n, chunk)]
            order = np.concatenate(
                [p[np.argsort(self._lengths[p], kind="stable")] for p in parts]
            ) if parts else order
        return order.tolist()

    def _fill(self, order: list[int]) -> list[list[int]]:
        """Greedy duplicate-free global batches over ``order``; clashing pairs are deferred
        and tried first for the next batches. All but the tail batches are full."""
        size = self.global_batch_size
        batches: list[list[int]] = []
        pending: list[int] = []
        stream = iter(order)
        exhausted = False
        while True:
            batch: list[int] = []
            qs: set[int] = set()
            ans: set[int] = set()
            still: list[int] = []
            for i in pending:
                if len(batch) < size and self._q[i] not in qs and self._a[i] not in ans:
                    batch.append(i)
                    qs.add(self._q[i])
                    ans.add(self._a[i])
                else:
                    still.append(i)
            pending = still
            while len(batch) < size and not exhausted:
                i = next(stream, None)
                if i is None:
                    exhausted = True
                elif self._q[i] not in qs and self._a[i] not in ans:
                    batch.append(i)
                    qs.add(self._q[i])
                    ans.add(self._a[i])
                else:
                    pending.append(i)
            if not batch:  # stream exhausted and nothing pending
                return batches
            batches.append(batch)

    def global_batches(self) -> list[list[int]]:
        """The epoch's global batches (identical on every rank), after ``drop_last``."""
        if self._cache is not None and self._cache[0] == self.epoch:
            return self._cache[1]
        rng = np.random.default_rng([self.seed, self.epoch])
        batches = self._fill(self._order(rng))
        size = self.global_batch_size
        full = [b for b in batches if len(b) == size]
        tail = [b for b in batches if len(b) < size]
        if self.bucket_by_length and self.shuffle:
            full = [full[k] for k in rng.permutation(len(full))]
        out = full if self.drop_last else full + tail
        self._cache = (self.epoch, out)
        return out

    def _shard(self, batch: list[int]) -> list[int]:
        per = self.batch_size if len(batch) == self.global_batch_size else (
            len(batch) // self.num_replicas)
        return batch[self.rank * per:(self.rank + 1) * per]

    def __iter__(self) -> Iterator[list[int]]:
        for batch in self.global_batches():
            part = self._shard(batch)
            if part:
                yield part

    def __len__(self) -> int:
        return sum(1 for b in self.global_batches() if self._shard(b))
