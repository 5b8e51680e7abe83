"""Question-answer matching loss of Cross-VAEs (eq. 6): binary cross-entropy of
``p_f(y | z_q, z_a)`` over the pairs of a batch.

Matching function (section 3.2: "cosine similarity with l2 normalization to measure the
matching probability"; eq. 6: ``f`` has parameters ``phi_f`` "to be optimized"): with
``c_ij = cos(z_q_i, z_a_j)``, the cosine of the l2-normalised latents,

* ``probability="sigmoid"`` (conf/model/vae.yaml's): ``p_ij = sigmoid(s * c_ij + b)``, a logistic
  calibration of the cosine whose scale ``s > 0`` (stored as ``log s``) and bias ``b`` are
  the matching parameters ``phi_f`` (conf/: learnable, init ``s = 10``, ``b = 0``).
  Because ``s > 0``, ranking by cosine is ranking by ``p``: the exported model scores with
  the plain cosine of the latent means and ranks as the trained matching function would.
* ``probability="linear"``: ``p_ij = (c_ij + 1) / 2`` clipped to ``[eps, 1 - eps]``, no
  parameters. (Taken literally it cannot fit the negatives: B vectors cannot all be
  pairwise opposite, so ``p_ij -> 0`` is out of reach; offered for comparison.)

Pairs and labels: the B matched pairs ``(q_i, a_i)`` have ``y = 1``; **every** in-batch
non-pair ``(q_i, a_j)``, ``i != j``, has ``y = 0`` (``B (B - 1)`` of them; the batch sampler
keeps question and answer texts unique within a batch, so none of them is a hidden match).

Weighting (the paper does not give the ratio of aligned to non-aligned pairs):

* ``weighting="balanced"`` (conf/'s): ``1/2 * (mean_i BCE(p_ii, 1) + mean_{i != j}
  BCE(p_ij, 0))``: positives and negatives count equally whatever the batch size, i.e. the
  expected BCE of a 1:1 mix of aligned and non-aligned pairs; a batch of one pair has no
  negative and gives its positive term alone.
* ``weighting="mean"``: the plain mean over all ``B^2`` pairs (positives are then 1/B of the
  loss).

The matrix is of each process's own batch (no gathering across processes). Computed in
float32 (also inside an autocast region).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .precision import float32_region

PROBABILITIES = ("sigmoid", "linear")
WEIGHTINGS = ("balanced", "mean")


def cosine_matrix(zq: torch.Tensor, za: torch.Tensor) -> torch.Tensor:
    """``C[i, j] = cos(zq_i, za_j)``, ``[B, B']``.

    Args:
        zq: question latents ``[B, D]``.
        za: answer latents ``[B', D]``.
    """
    if zq.dim() != 2 or za.dim() != 2 or zq.shape[1] != za.shape[1]:
        raise ValueError(f"zq and za must be [B, D] with equal D, got {tuple(zq.shape)}, "
                         f"{tuple(za.shape)}")
    return F.normalize(zq, dim=-1) @ F.normalize(za, dim=-1).T


def balanced_mean(values: torch.Tensor, positive: torch.Tensor) -> torch.Tensor:
    """``1/2 (mean over positive entries + mean over the others)``; only the positive mean
    when there are no others.

    Args:
        values: per-pair values (the BCE matrix ``[B, B']``).
        positive: bool mask of ``values``'s shape, True at the matched pairs.
    """
    pos = values[positive].mean()
    negative = ~positive
    if not negative.any():
        return pos
    return 0.5 * (pos + values[negative].mean())


class LatentMatchingLoss(nn.Module):
    """``forward(zq[B, D], za[B, D]) -> scalar`` (see the module docstring): row ``i`` of
    ``zq`` (question latents) and of ``za`` (answer latents) is pair ``i``.

    Args:
        probability: ``"sigmoid"`` or ``"linear"``.
        scale: initial ``s`` of the sigmoid (> 0; stored as ``log s``).
        bias: initial ``b`` of the sigmoid.
        learnable: whether ``s`` and ``b`` are trained (else fixed buffers); only with
            ``"sigmoid"``.
        weighting: ``"balanced"`` or ``"mean"``.
        eps: clipping of the linear probability to ``[eps, 1 - eps]``.

    The settings are the keys of ``model.loss.matching`` (conf/model/vae.yaml).

    Example:

        >>> import torch
        >>> loss = LatentMatchingLoss(probability="sigmoid", scale=10.0, bias=0.0,
        ...                           learnable=True, weighting="balanced")
        >>> zq, za = torch.randn(4, 16), torch.randn(4, 16)
        >>> loss.probabilities(zq, za).shape
        torch.Size([4, 4])
        >>> value = loss(zq, za)
        >>> value.shape, bool(value > 0)
        (torch.Size([]), True)
    """

    def __init__(self, *, probability: str, scale: float, bias: float, learnable: bool,
                 weighting: str, eps: float = 1e-6) -> None:
        super().__init__()
        if probability not in PROBABILITIES:
            raise ValueError(f"probability={probability!r}; expected one of {list(PROBABILITIES)}")
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting={weighting!r}; expected one of {list(WEIGHTINGS)}")
        if not (scale > 0 and math.isfinite(scale)):
            raise ValueError(f"scale must be positive and finite, got {scale}")
        self.probability, self.weighting, self.eps = probability, weighting, float(eps)
        log_scale = torch.tensor(math.log(scale))
        bias_t = torch.tensor(float(bias))
        if probability == "sigmoid" and learnable:
            self.log_scale = nn.Parameter(log_scale)
            self.bias = nn.Parameter(bias_t)
        else:
            self.register_buffer("log_scale", log_scale)
            self.register_buffer("bias", bias_t)

    @property
    def scale(self) -> torch.Tensor:
        return self.log_scale.exp()

    def extra_repr(self) -> str:
        return (f"probability={self.probability!r}, weighting={self.weighting!r}, "
                f"scale={self.scale.item():.4g}, bias={self.bias.item():.4g}")

    def probabilities(self, zq: torch.Tensor, za: torch.Tensor) -> torch.Tensor:
        """``P[i, j] = p_f(y = 1 | zq_i, za_j)``."""
        with float32_region(zq, za) as (zq, za):
            cos = cosine_matrix(zq, za)
            if self.probability == "sigmoid":
                return torch.sigmoid(self.scale * cos + self.bias)
            return ((cos + 1.0) / 2.0).clamp(self.eps, 1.0 - self.eps)

    def forward(self, zq: torch.Tensor, za: torch.Tensor) -> torch.Tensor:
        if zq.shape[0] != za.shape[0]:
            raise ValueError(f"{zq.shape[0]} questions but {za.shape[0]} answers: row i of "
                             "each must be pair i")
        with float32_region(zq, za) as (zq, za):
            cos = cosine_matrix(zq, za)
            labels = torch.eye(cos.shape[0], dtype=cos.dtype, device=cos.device)
            if self.probability == "sigmoid":
                bce = F.binary_cross_entropy_with_logits(self.scale * cos + self.bias, labels,
                                                         reduction="none")
            else:
                p = ((cos + 1.0) / 2.0).clamp(self.eps, 1.0 - self.eps)
                bce = F.binary_cross_entropy(p, labels, reduction="none")
            if self.weighting == "mean":
                return bce.mean()
            return balanced_mean(bce, labels.bool())
