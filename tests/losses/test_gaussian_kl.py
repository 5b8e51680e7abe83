"""Gaussian KL to N(0, I) (Cross-VAEs eq. 5): closed form, summed over the latent
dimensions, averaged over the batch, in float32."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Normal, kl_divergence

from retrieval_qa.losses.gaussian_kl import GaussianKLLoss, gaussian_kl


def test_two_dimensional_example_against_the_closed_form():
    # mu = (1, -2), sigma^2 = (0.5, 2):
    # 1/2 [(1 + 0.5 - 1 - log 0.5) + (4 + 2 - 1 - log 2)] = 1/2 (0.5 + 5) = 2.75
    mean = torch.tensor([[1.0, -2.0]])
    logvar = torch.log(torch.tensor([[0.5, 2.0]]))
    by_hand = 0.5 * ((1 + 0.5 - 1 - math.log(0.5)) + (4 + 2 - 1 - math.log(2.0)))
    assert by_hand == pytest.approx(2.75)
    assert gaussian_kl(mean, logvar).item() == pytest.approx(2.75, rel=1e-6)
    assert GaussianKLLoss()(mean, logvar).item() == pytest.approx(2.75, rel=1e-6)


def test_matches_torch_distributions_and_averages_over_the_batch():
    torch.manual_seed(0)
    mean, logvar = torch.randn(5, 7), torch.randn(5, 7)
    reference = kl_divergence(Normal(mean, (0.5 * logvar).exp()),
                              Normal(torch.zeros(7), torch.ones(7))).sum(-1)
    assert torch.allclose(gaussian_kl(mean, logvar), reference, atol=1e-5)
    assert GaussianKLLoss()(mean, logvar).item() == pytest.approx(reference.mean().item(),
                                                                  rel=1e-5)


def test_zero_at_the_prior_and_positive_elsewhere():
    assert GaussianKLLoss()(torch.zeros(3, 4), torch.zeros(3, 4)).item() == 0.0
    assert GaussianKLLoss()(torch.zeros(3, 4), torch.full((3, 4), -1.0)).item() > 0


def test_float32_under_autocast_and_shape_check():
    mean = torch.randn(4, 3).bfloat16()
    logvar = torch.randn(4, 3).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        kl = GaussianKLLoss()(mean, logvar)
    assert kl.dtype == torch.float32
    with pytest.raises(ValueError, match="differ"):
        gaussian_kl(torch.zeros(2, 3), torch.zeros(2, 4))
