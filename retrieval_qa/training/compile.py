"""``trainer.compile``: torch.compile the token encoders of a method's towers, in place.

The token encoders (a pretrained transformer, a recurrent or transformer stack) hold nearly
all the compute of a step; poolers, projections and losses stay eager. Modules are compiled
in place (``nn.Module.compile``), so parameter names, checkpoints and exports are unchanged.
Where compiling fails (no compiler, an unsupported operation, a graph break that cannot be
handled) torch.compile falls back to eager execution with a warning: the run goes on,
slower, and the warning says why. Shapes repeat when ``data.pad_to_multiple_of`` is set,
which lets CUDA graphs (``reduce-overhead``) be reused.
"""

from __future__ import annotations

import logging

from torch import nn

log = logging.getLogger(__name__)
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
BACKEND = "inductor"


def token_encoders(module: nn.Module) -> list[nn.Module]:
    """Each distinct ``token_encoder`` under ``module`` (shared towers: once)."""
    seen: dict[int, nn.Module] = {}
    for sub in module.modules():
        encoder = getattr(sub, "token_encoder", None)
        if isinstance(encoder, nn.Module):
            seen.setdefault(id(encoder), encoder)
    return list(seen.values())


def compile_mode(setting: bool | str) -> str:
    """The mode that ``trainer.compile`` names (``true``: default); an error otherwise."""
    mode = "default" if setting is True else str(setting)
    if mode not in MODES:
        raise ValueError(f"trainer.compile={setting!r}; expected false, true or one of {MODES}")
    return mode


def compile_encoders(module: nn.Module, setting: bool | str) -> list[nn.Module]:
    """Compile every token encoder of ``module`` in place; ``setting`` is ``true`` (the
    default mode) or a mode of :data:`MODES`. Returns the compiled modules."""
    mode = compile_mode(setting)
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
