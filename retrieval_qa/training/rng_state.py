"""The process's random-number states (torch, every CUDA device, numpy, python), saved with
the resumable checkpoint and restored before the first training step after a restart
(:class:`~.resumable_checkpoints.ResumableCheckpoints`), so dropout draws the same masks as in
the uninterrupted run."""

from __future__ import annotations

import logging
import random

import numpy as np
import torch

log = logging.getLogger(__name__)


def rng_states() -> dict:
    """The process's random-number states (torch, every CUDA device, numpy, python) as
    tensors and plain values, loadable from a checkpoint with ``weights_only=True``."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    version, state, py_gauss = random.getstate()
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss),
                      float(gauss)],
            "python": [version, list(state), py_gauss]}


def set_rng_states(states: dict) -> None:
    """Restore what :func:`rng_states` returned. CUDA states: those of the devices that are
    visible (a checkpoint written with more GPUs than this process sees, or on a GPU and
    resumed on a CPU, restores what it can and says so in a log line).

    Args:
        states: what :func:`rng_states` returned.
    """
    torch.set_rng_state(states["torch"])
    cuda = states["cuda"]
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for device, state in enumerate(cuda[:visible]):
        torch.cuda.set_rng_state(state, device)
    if cuda and len(cuda) != visible:
        log.warning("the checkpoint holds the CUDA random-number states of %d device(s) and "
                    "%d are visible: restored those of the first %d only", len(cuda), visible,
                    min(len(cuda), visible))
    kind, keys, pos, has_gauss, gauss = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, state, py_gauss = states["python"]
    random.setstate((version, tuple(state), py_gauss))
