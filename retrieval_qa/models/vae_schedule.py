"""KL cost annealing of Dual-VAEs / Cross-VAEs (Cross-VAEs section 4.3; Bowman et al. 2016).

"We increase the weight beta of the KL-divergence by a rate of 2/epochs per epoch until it
reaches 1": with ``E`` training epochs, ``beta(e) = min(1, 2 e / E)``, 0 at the start, 1 from
half the training on (epoch 50 of the paper's 100).

Epochs are 0-based and may be fractional: the training module passes ``current_epoch +
batch / batches_per_epoch``, so beta rises with every step (a per-epoch staircase would keep
beta at 0 for the whole first epoch, and for the whole of a one-epoch run). Pass an integer
epoch for the staircase.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["KLAnnealing"]


@dataclass(frozen=True)
class KLAnnealing:
    """``beta(epoch) = min(max_beta, start + rate * max(epoch, 0))`` with ``rate =
    rate_factor / epochs``; paper: ``rate_factor = 2``, ``max_beta = 1``, ``start = 0``.

    Attributes:
        epochs: the run's total epochs E (fractional allowed, > 0).
        rate_factor: beta's rise over the E epochs (> 0; ``model.loss.kl``,
            conf/model/vae.yaml, as are the next two).
        max_beta: beta's ceiling.
        start: beta at epoch 0 (``0 <= start <= max_beta``).

    Example:

        >>> beta = KLAnnealing(100, rate_factor=2.0, max_beta=1.0, start=0.0)
        >>> beta(10.0), beta(80.0)
        (0.2, 1.0)
    """

    epochs: float
    rate_factor: float
    max_beta: float
    start: float

    def __post_init__(self) -> None:
        for name in ("epochs", "rate_factor"):
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be positive and finite, got {value}")
        if not (0 <= self.start <= self.max_beta and math.isfinite(self.max_beta)):
            raise ValueError(f"need 0 <= start <= max_beta < inf, got start={self.start}, "
                             f"max_beta={self.max_beta}")

    @property
    def rate(self) -> float:
        """Increase of beta per epoch (``2 / E`` in the paper)."""
        return self.rate_factor / self.epochs

    @property
    def saturation_epoch(self) -> float:
        """The epoch from which beta stays at ``max_beta`` (``E / 2`` in the paper)."""
        return (self.max_beta - self.start) / self.rate

    def __call__(self, epoch: float) -> float:
        if math.isnan(epoch):
            raise ValueError("epoch is NaN")
        return min(self.max_beta, self.start + self.rate * max(float(epoch), 0.0))
