"""The training pairs of a data module: the split's own pairs plus extra pair sources, with
their per-pair weights.

The split's pairs weigh 1; each :class:`~.pair_sources.PairSource` (``data.extra_pairs``
files, or pairs added in process such as ``rqa mine``'s) adds its pairs with their weights,
minus those whose question or answer text is in the validation pool (dropped and counted per
source). Without a source there are no weights (None: the plain loss) unless they are set
(:meth:`TrainingPairs.set_weights`).
"""

from __future__ import annotations

from collections.abc import Sequence

from .pair_sources import PairSource
from .types import QAPair, RetrievalPool


class TrainingPairs:
    """The training pairs and their weights, merged from the split and the extra sources.

    Args:
        sources: the extra pair sources, in order (their pairs follow the split's).

    Example:

        >>> from retrieval_qa.data.types import Candidate
        >>> pair = QAPair("q?", "a .", "a .", "q1", "a1")
        >>> val = RetrievalPool("d", "v", [Candidate("b1", "b .", "b .", "d1")], ["q2?"], [[0]],
        ...                     [QAPair("q2?", "b .", "b .", "q2", "b1")])
        >>> pairs = TrainingPairs([PairSource("mined", [QAPair("q2?", "c .", "c .", "m", "m"),
        ...                                             QAPair("q3?", "c .", "c .", "m", "m")],
        ...                                   [0.5, 0.25])])
        >>> pairs.set_split([pair], val)
        >>> [p.question for p in pairs.pairs], pairs.weights
        (['q?', 'q3?'], [1.0, 0.25])
        >>> pairs.report
        [{'name': 'mined', 'pairs': 2, 'kept': 1, 'dropped_validation_overlap': 1}]
    """

    def __init__(self, sources: Sequence[PairSource] = ()) -> None:
        self.sources: list[PairSource] = list(sources)
        self.split_pairs: list[QAPair] | None = None
        self.val_pool: RetrievalPool | None = None
        self.pairs: list[QAPair] | None = None
        self.weights: list[float] | None = None
        self.report: list[dict] | None = None

    @classmethod
    def from_config(cls, extra_pairs: Sequence[dict] | None) -> TrainingPairs:
        """The sources of ``data.extra_pairs`` (:meth:`.PairSource.from_config`), read now.

        Args:
            extra_pairs: ``[{path, weight, name}, ...]`` or None (no extra pairs).
        """
        return cls([PairSource.from_config(c) for c in extra_pairs or []])

    def set_split(self, pairs: list[QAPair], val_pool: RetrievalPool) -> None:
        """The split's pairs and the validation pool whose texts no source pair may hold;
        merges the sources.

        Args:
            pairs: the split's training pairs (weight 1).
            val_pool: the validation pool.
        """
        self.split_pairs, self.val_pool = pairs, val_pool
        self.merge()

    def add(self, name: str, pairs: Sequence[QAPair],
            weights: Sequence[float] | None = None) -> None:
        """One more source (merged at once when the split is set, else with it).

        Args:
            name: the source's name in the report.
            pairs: its pairs.
            weights: one weight per pair; None: each weighs 1.
        """
        self.sources.append(PairSource(name, list(pairs), weights))
        if self.split_pairs is not None:
            self.merge()

    def merge(self) -> None:
        """Training pairs = the split's pairs + every source's, minus source pairs whose
        question or answer text is in the validation pool (counted per source in
        :attr:`report`); without a source the weights are left as they are."""
        pairs = list(self.split_pairs)
        if not self.sources:
            self.pairs = pairs
            return
        weights = [1.0] * len(pairs)
        val = self.val_pool
        val_q, val_a = set(val.questions), {c.text for c in val.candidates}
        report = []
        for source in self.sources:
            kept = [(p, w) for p, w in zip(source.pairs, source.weights(), strict=True)
                    if p.question not in val_q and p.answer not in val_a]
            pairs += [p for p, _ in kept]
            weights += [w for _, w in kept]
            report.append({"name": source.name, "pairs": len(source.pairs), "kept": len(kept),
                           "dropped_validation_overlap": len(source.pairs) - len(kept)})
        self.pairs, self.weights, self.report = pairs, weights, report

    def set_weights(self, weights: Sequence[float] | None) -> None:
        """Per-pair weights aligned with :attr:`pairs`; None removes them.

        Args:
            weights: one weight per training pair, or None.
        """
        if weights is not None and len(weights) != len(self.pairs):
            raise ValueError(f"{len(weights)} weights for {len(self.pairs)} training pairs")
        self.weights = None if weights is None else [float(w) for w in weights]
