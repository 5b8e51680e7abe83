"""``trainer.compile``: torch.compile the token encoders of a method's towers, in place.

The token encoders (a pretrained transformer, a recurrent or transformer stack) hold nearly
all the compute of a step; poolers, projections and losses stay eager. Modules are compiled
in place (``nn.Module.compile``), so parameter names, checkpoints and exports are unchanged.
Where compiling fails (no compiler, an unsupported operation, a graph break that cannot be
handled) torch.compile falls back to eager execution with a warning: the run goes on,
slower, and the warning says why. Shapes repeat when ``data.pad_to_multiple_of`` is set,
which lets CUDA graphs (``reduce-overhead``) be reused.

Compiled fp32 training on CUDA (``trainer.precision: 32``) crashes torch 2.11 with a
segmentation fault in the memory-efficient attention's backward kernel (seen on an H200;
pytorch/pytorch#172233 reports the same kernel crashing). There the memory-efficient
SDPA backend is switched off for the process, so attention runs on the math kernel, with a
warning; mixed precision keeps every backend.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

log = logging.getLogger(__name__)
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
BACKEND = "inductor"


def token_encoders(module: nn.Module) -> list[nn.Module]:
    """Each distinct ``token_encoder`` under ``module`` (shared towers: once).

    Args:
        module: the model.
    """
    seen: dict[int, nn.Module] = {}
    for sub in module.modules():
        encoder = getattr(sub, "token_encoder", None)
        if isinstance(encoder, nn.Module):
            seen.setdefault(id(encoder), encoder)
    return list(seen.values())


def compile_mode(setting: bool | str) -> str:
    """The mode that ``trainer.compile`` names (``true``: default); an error otherwise.

    Args:
        setting: ``trainer.compile``: True, or a mode of :data:`MODES`.
    """
    mode = "default" if setting is True else str(setting)
    if mode not in MODES:
        raise ValueError(f"trainer.compile={setting!r}; expected false, true or one of {MODES}")
    return mode


def avoid_fp32_efficient_attention(precision: str, cuda: bool | None = None) -> bool:
    """Switch the memory-efficient SDPA backend off where compiled fp32 training on CUDA
    would crash in its backward kernel (the module's docstring); True if it did.

    Args:
        precision: the run's resolved ``trainer.precision``.
        cuda: whether it trains on CUDA; None: ``torch.cuda.is_available()``.
    """
    cuda = torch.cuda.is_available() if cuda is None else cuda
    if str(precision) not in ("32", "32-true") or not cuda:
        return False
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    log.warning("trainer.compile with precision %s on CUDA: the memory-efficient attention "
                "backend is off for this process (its compiled fp32 backward crashes torch "
                "%s); attention runs on the math kernel", precision, torch.__version__)
    return True


def compile_encoders(module: nn.Module, setting: bool | str, precision: str) -> list[nn.Module]:
    """Compile every token encoder of ``module`` in place; returns the compiled modules.

    Args:
        module: the model.
        setting: ``trainer.compile``: ``true`` (the default mode) or a mode of :data:`MODES`.
        precision: the run's resolved ``trainer.precision``.
    """
    mode = compile_mode(setting)
    avoid_fp32_efficient_attention(precision)
    import torch._dynamo

    torch._dynamo.config.suppress_errors = True  # fall back to eager, with a warning
    encoders = token_encoders(module)
    if not encoders:
        log.warning("trainer.compile=%s: this method has no token encoder to compile", setting)
    for encoder in encoders:
        encoder.compile(mode=None if mode == "default" else mode, backend=BACKEND,
                        dynamic=None)
    log.info("compiled %d token encoder(s) with torch.compile (mode %s)", len(encoders), mode)
    return encoders
