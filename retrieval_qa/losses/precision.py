"""Loss arithmetic in float32, also inside an autocast region.

Under ``trainer.precision=bf16-mixed`` (or ``16-mixed``) Lightning runs the step inside
``torch.autocast``, which casts the inputs of a matrix product back to the low precision
whatever ``.float()`` did before it. The score matrices of the in-batch softmax and GAM's
neighbour logits (weighted up to 1e4) must not be rounded that way, so the losses compute
them inside :func:`float32_region`: autocast off, inputs upcast. The towers' own forward
passes stay in the mixed precision.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch


@contextmanager
def float32_region(*tensors: torch.Tensor):
    """Autocast off on the tensors' device; yields the tensors as float32 (others as is).

    Args:
        tensors: the inputs; low-precision floating tensors are upcast to float32, float64
            and non-floating tensors pass as they are. The first one's device decides the
            autocast region's device type (``"cpu"`` without tensors).

    Example:

        >>> import torch
        >>> with float32_region(torch.ones(2, dtype=torch.bfloat16)) as (x,):
        ...     x.dtype
        torch.float32
    """
    device_type = tensors[0].device.type if tensors else "cpu"
    with torch.autocast(device_type=device_type, enabled=False):
        yield tuple(t.float() if t.is_floating_point() and t.dtype != torch.float64 else t
                    for t in tensors)
