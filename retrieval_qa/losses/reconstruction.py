"""Token reconstruction loss of the VAE decoders (Cross-VAEs eq. 4: ``-log p_D(x | z)``).

``forward(logits, targets[B, T], mask[B, T]) -> scalar``, where ``logits`` are either

* ``[B, T, V]``: one distribution per target position (the GRU decoder, teacher forcing), or
* ``[B, V]``: one distribution for every position of a text (the MLP bag-of-words decoder),

and the per-token loss is the cross-entropy ``-log softmax(logits)[target]``. Positions with
``mask`` 0 (padding, or targets outside a restricted output vocabulary) count nothing.

``reduction``:

* ``"sequence"``: the negative log-likelihood of each text, **summed over its
  tokens**, averaged over the batch. This is the ELBO's reconstruction term, on the same
  per-text scale as the KL term (summed over the latent dimensions), so beta = 1 is the
  true ELBO.
* ``"token"``: the mean over all real target tokens of the batch (per-token perplexity
  scale; the KL then weighs far more, which the weights alpha / beta must absorb).

Computed in float32 (also inside an autocast region).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .precision import float32_region

REDUCTIONS = ("sequence", "token")


def token_nll(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[B, T]`` per-token negative log-likelihoods, 0 where ``mask`` is 0.

    Args:
        logits: ``[B, T, V]`` (one distribution per position) or ``[B, V]`` (one for every
            position of a text).
        targets: ``[B, T]`` target token ids (negative ids are allowed where ``mask`` is 0).
        mask: ``[B, T]``, 1 at the positions that count, 0 elsewhere.
    """
    if targets.shape != mask.shape:
        raise ValueError(f"targets {tuple(targets.shape)} and mask {tuple(mask.shape)} differ")
    safe = targets.clamp(min=0)
    if logits.dim() == 3:
        if logits.shape[:2] != targets.shape:
            raise ValueError(f"logits {tuple(logits.shape)} do not match targets "
                             f"{tuple(targets.shape)}")
        nll = F.cross_entropy(logits.flatten(0, 1), safe.flatten(), reduction="none")
        nll = nll.view_as(targets)
    elif logits.dim() == 2:
        if logits.shape[0] != targets.shape[0]:
            raise ValueError(f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)} "
                             "have different batch sizes")
        nll = -torch.log_softmax(logits, dim=-1).gather(1, safe)
    else:
        raise ValueError(f"logits must be [B, T, V] or [B, V], got {tuple(logits.shape)}")
    return nll * mask.to(nll.dtype)


class TokenReconstructionLoss(nn.Module):
    """See the module docstring; ``reduction``: ``model.loss.reconstruction`` of
    conf/model/vae.yaml.

    Args:
        reduction: ``"sequence"`` (each text's summed NLL, averaged over the batch) or
            ``"token"`` (the mean over the batch's real target tokens).

    ``forward(logits, targets, mask)``: ``logits`` ``[B, T, V]`` (one distribution per
    position) or ``[B, V]`` (one per text), ``targets`` ``[B, T]`` token ids, ``mask``
    ``[B, T]`` (1: a real target, 0: ignored); returns a scalar.

    Example:

        >>> import torch
        >>> loss = TokenReconstructionLoss(reduction="sequence")
        >>> logits = torch.zeros(2, 3, 10)  # uniform over 10 tokens: -log p = log 10 each
        >>> targets = torch.tensor([[1, 2, 0], [3, 0, 0]])
        >>> mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
        >>> value = loss(logits, targets, mask)  # (2 + 1) / 2 tokens per text, times log 10
        >>> value.shape, bool(torch.isclose(value, 1.5 * torch.log(torch.tensor(10.0))))
        (torch.Size([]), True)
    """

    def __init__(self, *, reduction: str) -> None:
        super().__init__()
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction={reduction!r}; expected one of {list(REDUCTIONS)}")
        self.reduction = reduction

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"

    def forward(self, logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
                ) -> torch.Tensor:
        with float32_region(logits) as (logits,):
            nll = token_nll(logits, targets, mask)
            if self.reduction == "sequence":
                return nll.sum(dim=1).mean()
            return nll.sum() / mask.sum().clamp(min=1).to(nll.dtype)
