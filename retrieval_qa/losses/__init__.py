"""Training losses, one per module.

The package's names are imported on first use (PEP 562), so a module that only needs the
relation names of GAM (:mod:`.relations`) imports no torch."""

from __future__ import annotations

import importlib

_WHERE = {"InBatchSoftmaxLoss": "in_batch_softmax",
          "QuadraticConditionalLoss": "quadratic_conditional",
          "BatchHardTripletLoss": "triplet"}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
