"""The map-style datasets of the data module's loaders: training pairs (with weights) and the
texts of an evaluation pool (with the labels the evaluator needs)."""

from __future__ import annotations

from collections.abc import Sequence

from torch.utils.data import Dataset

from .types import QAPair


class PairDataset(Dataset):
    """Training pairs as items ``(index, QAPair)`` or, with weights, ``(index, QAPair, w)``.

    Args:
        pairs: the training pairs.
        weights: one per pair; None: no weights in the items.
    """

    def __init__(self, pairs: Sequence[QAPair], weights: Sequence[float] | None = None) -> None:
        if weights is not None and len(weights) != len(pairs):
            raise ValueError(f"{len(weights)} weights for {len(pairs)} pairs")
        self.pairs = pairs
        self.weights = weights

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i: int) -> tuple:
        if self.weights is None:
            return i, self.pairs[i]
        return i, self.pairs[i], float(self.weights[i])


class IndexedDataset(Dataset):
    """Items ``(index, value)`` for the listed indices of ``values`` (one shard, in order), or
    ``(index, value, label)`` with ``labels`` aligned with ``values``.

    Args:
        values: the values (questions or candidates).
        indices: the indices of this shard, in order.
        labels: aligned with ``values``; None: no labels in the items.
    """

    def __init__(self, values: Sequence, indices: Sequence[int],
                 labels: Sequence | None = None) -> None:
        self.values = values
        self.indices = list(indices)
        self.labels = labels

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, k: int) -> tuple:
        i = self.indices[k]
        if self.labels is None:
            return i, self.values[i]
        return i, self.values[i], self.labels[i]
