"""KL divergence of a diagonal Gaussian posterior to the standard normal prior (Cross-VAEs
eq. 5; Kingma and Welling 2013, appendix B).

For ``q(z | x) = N(mu, diag(sigma^2))`` and ``p(z) = N(0, I)``, in closed form::

    KL(q || p) = 1/2 * sum_d (mu_d^2 + sigma_d^2 - 1 - log sigma_d^2)

Reduction: **summed over the latent dimensions** (the KL of the joint Gaussian, as in the
ELBO) and **averaged over the batch** (one Monte-Carlo estimate of the expectation over
texts in eq. 5). Eq. 5 has one such term per side; the training module adds the question's
and the answer's. The posterior is parameterised by ``logvar = log sigma^2``.
"""

from __future__ import annotations

import torch
from torch import nn

from .precision import float32_region


def gaussian_kl(mean: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """Per-example ``KL(N(mean, diag(exp(logvar))) || N(0, I))``: ``[B, Z] -> [B]``.

    Args:
        mean: the posterior's means ``mu``, ``[B, Z]``.
        logvar: the posterior's ``log sigma^2``, ``[B, Z]``.
    """
    if mean.shape != logvar.shape:
        raise ValueError(f"mean {tuple(mean.shape)} and logvar {tuple(logvar.shape)} differ")
    return 0.5 * (mean.pow(2) + logvar.exp() - 1.0 - logvar).sum(dim=-1)


class GaussianKLLoss(nn.Module):
    """``forward(mean[B, Z], logvar[B, Z]) -> scalar``: :func:`gaussian_kl` averaged over the
    batch, computed in float32 (also inside an autocast region).

    No constructor arguments. ``forward`` takes the posterior's ``mean`` ``[B, Z]`` and
    ``logvar`` ``[B, Z]`` (``log sigma^2``).

    Example:

        >>> import torch
        >>> kl = GaussianKLLoss()
        >>> kl(torch.zeros(2, 3), torch.zeros(2, 3))  # the prior itself
        tensor(0.)
        >>> kl(torch.ones(2, 3), torch.zeros(2, 3))  # 1/2 * sum_d mu_d^2 = 1.5
        tensor(1.5000)
    """

    def forward(self, mean: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
        with float32_region(mean, logvar) as (mean, logvar):
            return gaussian_kl(mean, logvar).mean()
