"""Training losses, one per module.

The package's names are imported on first use (PEP 562), so a module that only needs the
relation names of GAM (:mod:`.relations`) imports no torch."""

from __future__ import annotations

from ..lazy import lazy_names

_WHERE = {"InBatchSoftmaxLoss": "in_batch_softmax",
          "QuadraticConditionalLoss": "quadratic_conditional",
          "BatchHardTripletLoss": "triplet"}

__all__ = sorted(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, _WHERE)
