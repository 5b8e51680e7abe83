"""Optimisers and learning-rate schedules from config (``model.optimizer``).

The optimiser: ``_target_`` naming any ``torch.optim.Optimizer`` class (its keyword arguments
are the block's keys, the schedule's keys excepted), or the short names ``name: adamw | adam
| adafactor | sgd`` of retrieval_qa/registry.py (which composition turns into the target);
``lr`` and ``weight_decay``. The schedule: ``schedule: constant | linear`` (linear decay to 0
after an optional linear warm-up of ``warmup_steps`` or ``warmup_ratio`` of the total steps).
"""

from __future__ import annotations

import torch
from torch.optim.lr_scheduler import LambdaLR

from ..registry import instantiate
from ..requirements import VersionError, release

SCHEDULES = ("constant", "linear")
FUSED_CPU_TORCH = (2, 4)  # the first torch with fused Adam / AdamW kernels for the CPU


def build_optimizer(params, cfg) -> torch.optim.Optimizer:
    """The optimiser that ``cfg`` (``model.optimizer``) names, over the parameters that
    require gradients.

    Args:
        params: the parameters (those without ``requires_grad`` are left out).
        cfg: the ``model.optimizer`` block (its ``_target_`` and the optimiser's arguments;
            see the module docstring).
    """
    params = [p for p in params if p.requires_grad]
    try:
        return instantiate(cfg, "model.optimizer", "optimizer", params=params)
    except RuntimeError as e:
        if "fused" in str(e) and release(torch.__version__) < FUSED_CPU_TORCH:
            raise VersionError(
                f"model.optimizer: {e}; fused Adam and AdamW on a CPU need torch >= 2.4, "
                f"{torch.__version__} is installed (fix: pip install -U 'torch>=2.4')") from e
        raise


def build_schedule(optimizer: torch.optim.Optimizer, cfg, total_steps: int) -> LambdaLR:
    """The learning-rate schedule of ``cfg`` (see the module docstring), a factor of the
    optimiser's learning rate per step.

    Args:
        optimizer: the optimiser it schedules.
        cfg: the ``model.optimizer`` block: ``schedule`` (``constant`` | ``linear``) and the
            optional ``warmup_steps`` or ``warmup_ratio`` (of ``total_steps``; the steps win).
        total_steps: the optimiser steps of the run (at least 1 is used).

    Example:

        >>> import torch
        >>> opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = build_schedule(opt, {"schedule": "linear", "warmup_steps": 2}, 4)
        >>> [sched.lr_lambdas[0](step) for step in range(4)]
        [0.5, 1.0, 1.0, 0.5]
    """
    schedule = cfg["schedule"]
    if schedule not in SCHEDULES:
        raise ValueError(f"model.optimizer.schedule={schedule!r}; expected one of {SCHEDULES}")
    total = max(int(total_steps), 1)
    warmup = int(cfg.get("warmup_steps") or 0) or int(float(cfg.get("warmup_ratio") or 0) * total)

    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        if schedule == "constant":
            return 1.0
        return max(0.0, (total - step) / max(total - warmup, 1))

    return LambdaLR(optimizer, factor)


def lightning_optimizers(params, cfg, total_steps: int) -> dict:
    """What a LightningModule's ``configure_optimizers`` returns: the optimiser of ``cfg`` and
    its schedule over ``total_steps`` (e.g. ``trainer.estimated_stepping_batches``), stepped
    every optimiser step.

    Args:
        params: the parameters (:func:`build_optimizer`).
        cfg: the ``model.optimizer`` block.
        total_steps: the optimiser steps of the run (:func:`build_schedule`).
    """
    optimizer = build_optimizer(params, cfg)
    return {"optimizer": optimizer,
            "lr_scheduler": {"scheduler": build_schedule(optimizer, cfg, total_steps),
                             "interval": "step"}}
