"""Extra training pairs with weights (``data.extra_pairs``: JSONL files, e.g. mined pairs;
``rqa mine`` adds its pairs through :meth:`ReQADataModule.add_pair_source`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from .types import QAPair


class PairSource:
    """Extra training pairs with weights.

    Args:
        name: the source's name.
        pairs: its pairs.
        weights: one per pair; None: each weighs 1.
    """

    def __init__(self, name: str, pairs: list[QAPair],
                 weights: Sequence[float] | None = None) -> None:
        if weights is not None and len(weights) != len(pairs):
            raise ValueError(f"pair source {name!r}: {len(weights)} weights for {len(pairs)} pairs")
        self.name, self.pairs, self.weights_ = name, pairs, weights

    def weights(self) -> list[float]:
        return [1.0] * len(self.pairs) if self.weights_ is None else [float(w) for w in self.weights_]

    @classmethod
    def from_config(cls, cfg: dict) -> PairSource:
        """``{path: JSONL file, weight: default weight (1), name: optional}``; each line
        ``{"question", "answer"[, "context", "weight"]}``."""
        if "path" not in cfg:
            raise KeyError(f"data.extra_pairs entry {cfg}: needs a 'path' to a JSONL file")
        path = Path(cfg["path"])
        default = float(cfg.get("weight", 1.0))
        pairs, weights = [], []
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise FileNotFoundError(f"data.extra_pairs: {path} does not exist") from None
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                question, answer = rec["question"], rec["answer"]
                weight = float(rec.get("weight", default))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                raise ValueError(f"{path}, line {n}: {type(e).__name__} {e}; each line must be a "
                                 'JSON object with "question" and "answer" (optional "context", '
                                 '"weight")') from None
            if not str(question).strip() or not str(answer).strip():
                raise ValueError(f"{path}, line {n}: empty question or answer; remove the line")
            context = rec.get("context", answer)
            pairs.append(QAPair(question, answer, context, f"{path.name}:{n}", f"{path.name}:{n}"))
            weights.append(weight)
        return cls(cfg.get("name", path.stem), pairs, weights)
