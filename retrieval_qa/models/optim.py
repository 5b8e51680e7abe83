"""Optimisers and learning-rate schedules from config (``model.optimizer``).

name: adamw | adam | adafactor | sgd;  schedule: constant | linear (linear decay to 0 after an
optional linear warm-up of ``warmup_steps`` or ``warmup_ratio`` of the total steps).
"""

from __future__ import annotations

import torch
from torch.optim.lr_scheduler import LambdaLR

OPTIMIZERS = ("adamw", "adam", "adafactor", "sgd")
SCHEDULES = ("constant", "linear")


def build_optimizer(params, cfg) -> torch.optim.Optimizer:
    name, lr, wd = cfg["name"], float(cfg["lr"]), float(cfg["weight_decay"])
    params = [p for p in params if p.requires_grad]
    # fused kernels: one pass over all parameters (CPU and CUDA), several times faster a step
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=wd, fused=True)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=wd, fused=True)
    if name == "adafactor":
        return torch.optim.Adafactor(params, lr=lr, weight_decay=wd)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=wd, momentum=0.9)
    raise ValueError(f"model.optimizer.name={name!r}; expected one of {OPTIMIZERS}")


def build_schedule(optimizer: torch.optim.Optimizer, cfg, total_steps: int) -> LambdaLR:
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
    every optimiser step."""
    optimizer = build_optimizer(params, cfg)
    return {"optimizer": optimizer,
            "lr_scheduler": {"scheduler": build_schedule(optimizer, cfg, total_steps),
                             "interval": "step"}}
