"""Frozen features: precomputed vectors of texts that stand in for tokenisation (e.g. the
base embeddings that residual refinement trains on). A feature file is a ``torch.save``d
dict ``{"texts": list[str], "vectors": FloatTensor[N, D]}``; row i is the vector of text i.
Batches then hold ``{"features": FloatTensor[B, D]}`` where token batches hold ids."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from ..written import Damaged, read_back, refuse


class FeatureTable:
    """The vector of each text of a feature file (the module docstring), looked up in
    place of tokenisation.

    Args:
        texts: the texts, row i the vector of text i.
        vectors: ``[N, D]`` their vectors.
        source: where they came from, for the errors.
    """
    def __init__(self, texts: Sequence[str], vectors: torch.Tensor,
                 source: str = "<in memory>") -> None:
        if vectors.dim() != 2 or len(texts) != len(vectors):
            raise ValueError(f"{source}: {len(texts)} texts and vectors of shape "
                             f"{tuple(vectors.shape)}; expected one [D] row per text")
        self.row = {t: i for i, t in enumerate(texts)}
        self.vectors = vectors.float()
        self.source = source

    @classmethod
    def load(cls, path: str | Path) -> FeatureTable:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"data.features={path}: no such file; write one with "
                                    "torch.save({'texts': [...], 'vectors': tensor}, path)")
        try:
            obj = read_back(path, lambda p: torch.load(p, map_location="cpu", weights_only=True),
                            "a torch.save file")
        except Damaged as damage:
            raise refuse(damage, "data.features", "write it again: torch.save({'texts': [...], "
                         "'vectors': tensor}, path)") from None
        if not isinstance(obj, dict) or not {"texts", "vectors"} <= set(obj):
            raise ValueError(f"{path}: expected a dict with 'texts' and 'vectors', got "
                             f"{type(obj).__name__} {sorted(obj) if isinstance(obj, dict) else ''}")
        return cls(obj["texts"], obj["vectors"], str(path))

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def check_covers(self, texts: Iterable[str], what: str) -> None:
        """Fail before training, not in the middle of it, naming the first missing text."""
        missing = [t for t in dict.fromkeys(texts) if t not in self.row]
        if missing:
            raise KeyError(f"{self.source}: no vector for {len(missing)} {what} texts, e.g. "
                           f"{missing[0]!r}; recompute the feature file over every training, "
                           "validation and test text")

    def lookup(self, texts: Sequence[str], contexts: Sequence[str] | None = None) -> dict:
        if contexts is not None:
            raise ValueError("frozen features encode the sentence alone: set "
                             "data.answer_with_context=false")
        try:
            rows = [self.row[t] for t in texts]
        except KeyError as e:
            raise KeyError(f"{self.source}: no vector for text {e.args[0]!r}") from None
        return {"features": self.vectors[rows]}
