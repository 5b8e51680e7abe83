"""Loss-weight schedules of ENDX (paper sections 3.4-3.5 and 4.4), built from the composed
``model.weights`` and ``model.gam`` blocks (the paper's values are in conf/model/endx.yaml, not
kept here).

* :class:`EndxLossWeights`: the weights of the total loss, eq. 13,
  ``L = alpha_dual L_dual + alpha_cross L_cross + alpha_ga L_ga``; paper: 0.25 / 0.25 / 0.5.
* :class:`LinearRamp`: a value that moves linearly from ``start`` to ``end`` over the first
  ``ramp_epochs`` epochs (fractional epochs allowed) and stays at ``end`` afterwards.
* :class:`GamWeightSchedule`: the four GAM weights of eq. 12 at an epoch. Paper (section 4.4):
  ``alpha_{a|q}`` and ``alpha_{q|a}`` rise linearly 0 -> 0.5 and ``alpha_{q|q}`` and
  ``alpha_{a|a}`` rise linearly 0 -> 1e4, both over the first 5 epochs.

Epochs are 0-based and may be fractional: ``epoch = current_epoch + step_in_epoch /
steps_per_epoch`` gives a per-step ramp; passing the integer ``current_epoch`` gives a
per-epoch staircase. The paper does not say which; the caller chooses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..losses.gam import RELATION_NAMES
from ..registry import require_keys

__all__ = [
    "EndxLossWeights",
    "GamWeightSchedule",
    "LinearRamp",
]

_GAM_KEYS = tuple(RELATION_NAMES.values())
_WEIGHT_KEYS = ("dual", "cross", "ga")


@dataclass(frozen=True)
class EndxLossWeights:
    """Weights of eq. 13 (``model.weights``; the paper's: 0.25, 0.25, 0.5).

    Attributes:
        dual: ``alpha_dual``, the weight of the dual encoder's loss (eq. 1).
        cross: ``alpha_cross``, the weight of the cross branch's loss (eq. 5).
        ga: ``alpha_ga``, the weight of GAM's loss (eq. 12).

    Example::

        weights = EndxLossWeights(dual=0.25, cross=0.25, ga=0.5)
        loss = weights.total(dual_loss, cross_loss, gam_loss)
    """

    dual: float
    cross: float
    ga: float

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> EndxLossWeights:
        """From ``model.weights`` (a mapping / DictConfig of ``dual``, ``cross``, ``ga``)."""
        unknown = set(cfg.keys()) - set(_WEIGHT_KEYS)
        if unknown:
            raise KeyError(f"unknown ENDX loss weight keys {sorted(unknown)}")
        require_keys(cfg, _WEIGHT_KEYS, "model.weights")
        return cls(**{k: float(cfg[k]) for k in _WEIGHT_KEYS})

    def total(self, dual: Any, cross: Any, ga: Any) -> Any:
        """Eq. 13: ``dual * L_dual + cross * L_cross + ga * L_ga`` (tensors or floats)."""
        return self.dual * dual + self.cross * cross + self.ga * ga


@dataclass(frozen=True)
class LinearRamp:
    """``start + (end - start) * min(max(epoch, 0) / ramp_epochs, 1)``.

    ``ramp_epochs == 0`` means no ramp: the value is ``end`` from epoch 0. Negative epochs
    clamp to ``start``.

    Attributes:
        start: the value at epoch 0.
        end: the value from ``ramp_epochs`` on.
        ramp_epochs: the ramp's length in epochs (finite, >= 0).

    Example:

        >>> LinearRamp(start=0.0, end=0.5, ramp_epochs=5)(2.5)
        0.25
    """

    start: float
    end: float
    ramp_epochs: float

    def __post_init__(self) -> None:
        if not (self.ramp_epochs >= 0 and math.isfinite(self.ramp_epochs)):
            raise ValueError(f"ramp_epochs must be a finite number >= 0, got {self.ramp_epochs}")

    def __call__(self, epoch: float) -> float:
        return self.value(epoch)

    def value(self, epoch: float) -> float:
        if self.ramp_epochs == 0:
            return float(self.end)
        frac = min(max(float(epoch), 0.0) / self.ramp_epochs, 1.0)
        return float(self.start + (self.end - self.start) * frac)


@dataclass(frozen=True)
class GamWeightSchedule:
    """The four GAM weights of eq. 12 as functions of the epoch; build from config with
    :meth:`from_config` (conf/model/endx.yaml's ``gam`` block reproduces section 4.4).

    Example::

        schedule = GamWeightSchedule.from_config(
            {"ramp_epochs": 5, "final": {"q|q": 1e4, "a|a": 1e4, "a|q": 0.5, "q|a": 0.5}})
        schedule(2.5)  # {"q|q": 5000.0, "a|a": 5000.0, "a|q": 0.25, "q|a": 0.25}

    Attributes:
        ramps: one :class:`LinearRamp` per relation, exactly the keys ``q|q``, ``a|a``,
            ``a|q`` and ``q|a``.
    """

    ramps: Mapping[str, LinearRamp]

    def __post_init__(self) -> None:
        if set(self.ramps) != set(_GAM_KEYS):
            raise KeyError(f"GAM schedule needs exactly the keys {_GAM_KEYS}, got {sorted(self.ramps)}")

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> GamWeightSchedule:
        """Build from a mapping / OmegaConf ``DictConfig``::

            ramp_epochs: 5          # shared ramp length
            final:                  # end values, every relation
              {"q|q": 1.0e4, "a|a": 1.0e4, "a|q": 0.5, "q|a": 0.5}
            start: 0.0              # optional shared start value (absent: 0, as the paper's)
            ramps:                  # optional full per-relation override
              "a|q": {start: 0.0, end: 0.5, ramp_epochs: 5}

        A relation in ``ramps`` takes its missing fields from the shared values.
        """
        unknown = set(cfg.keys()) - {"ramp_epochs", "start", "final", "ramps"}
        if unknown:
            raise KeyError(f"unknown GAM schedule keys {sorted(unknown)}")
        require_keys(cfg, ("ramp_epochs", "final"), "the GAM schedule")
        ramp_epochs = float(cfg["ramp_epochs"])
        start = float(cfg.get("start", 0.0))
        final_cfg = cfg["final"]
        bad = set(final_cfg.keys()) - set(_GAM_KEYS)
        if bad:
            raise KeyError(f"unknown GAM relations in 'final': {sorted(bad)}")
        require_keys(final_cfg, _GAM_KEYS, "the GAM schedule's final")
        final = {k: float(final_cfg[k]) for k in _GAM_KEYS}
        ramps_cfg = cfg.get("ramps") or {}
        bad = set(ramps_cfg.keys()) - set(_GAM_KEYS)
        if bad:
            raise KeyError(f"unknown GAM relations in 'ramps': {sorted(bad)}")
        ramps = {}
        for key in _GAM_KEYS:
            spec = ramps_cfg.get(key) or {}
            ramps[key] = LinearRamp(
                start=float(spec.get("start", start)),
                end=float(spec.get("end", final[key])),
                ramp_epochs=float(spec.get("ramp_epochs", ramp_epochs)),
            )
        return cls(ramps=ramps)

    def __call__(self, epoch: float) -> dict[str, float]:
        return self.weights(epoch)

    def weights(self, epoch: float) -> dict[str, float]:
        """``{"q|q", "a|a", "a|q", "q|a"} -> weight`` at ``epoch`` (pass to GAM, eq. 12)."""
        return {key: self.ramps[key](epoch) for key in _GAM_KEYS}
