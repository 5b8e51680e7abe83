"""Matching loss of Cross-VAEs eq. 6: BCE over cosine similarities of l2-normalised latents,
diagonal pairs y = 1, in-batch non-pairs y = 0, classes balanced."""

from __future__ import annotations

import math

import pytest
import torch

from retrieval_qa.losses.matching import LatentMatchingLoss, cosine_matrix
from retrieval_qa.registry import config_values
from retrieval_qa.training.compose import load_group


def matching(**settings) -> LatentMatchingLoss:
    """The loss with conf/model/vae.yaml's ``loss.matching`` (their one source) and
    ``settings`` over them."""
    conf = config_values(load_group("model", "vae").loss.matching)
    return LatentMatchingLoss(**{**conf, **settings})


# cosines by construction: q = (1, 0), (0, 1), (-1, 0); a = (1, 0), (0, 1), (0, -1)
#   C = [[ 1, 0,  0],
#        [ 0, 1, -1],
#        [-1, 0,  0]]     (latents scaled: only directions count)
ZQ = torch.tensor([[2.0, 0.0], [0.0, 3.0], [-0.5, 0.0]])
ZA = torch.tensor([[4.0, 0.0], [0.0, 1.0], [0.0, -2.0]])


def test_cosine_matrix():
    assert torch.allclose(cosine_matrix(ZQ, ZA),
                          torch.tensor([[1.0, 0, 0], [0, 1, -1], [-1, 0, 0]]))


def test_hand_example_sigmoid():
    loss = matching(scale=2.0, bias=0.0, learnable=False)
    # logits 2C; BCE(y=1, l) = softplus(-l), BCE(y=0, l) = softplus(l)
    sp2 = math.log1p(math.exp(-2.0))  # softplus(-2) = -log sigmoid(2)
    log2 = math.log(2.0)
    positives = [sp2, sp2, log2]                   # C_00 = 1, C_11 = 1, C_22 = 0
    negatives = [log2, log2, log2, sp2, sp2, log2]  # (0,1) (0,2) (1,0) (1,2)=-1 (2,0)=-1 (2,1)
    balanced = 0.5 * (sum(positives) / 3 + sum(negatives) / 6)
    assert loss(ZQ, ZA).item() == pytest.approx(balanced, rel=1e-6)
    plain = matching(scale=2.0, learnable=False, weighting="mean")
    assert plain(ZQ, ZA).item() == pytest.approx((sum(positives) + sum(negatives)) / 9, rel=1e-6)


def test_hand_example_linear():
    loss = matching(probability="linear", eps=1e-7)
    # p = (C + 1) / 2 = [[1, .5, .5], [.5, 1, 0], [0, .5, .5]]; p = 1 (y=1) and p = 0 (y=0)
    # cost -log(1 - eps) ~ 0, every p = .5 costs log 2
    log2 = math.log(2.0)
    positives = [0.0, 0.0, log2]
    negatives = [log2, log2, log2, 0.0, 0.0, log2]
    assert loss(ZQ, ZA).item() == pytest.approx(0.5 * (sum(positives) / 3 + sum(negatives) / 6),
                                                 rel=1e-5)
    assert loss.probabilities(ZQ, ZA)[1].tolist() == pytest.approx([0.5, 1 - 1e-7, 1e-7])


def test_learned_scale_and_bias_get_gradients_and_the_scale_stays_positive():
    loss = matching(scale=10.0, bias=0.0)
    assert loss.scale.item() == pytest.approx(10.0)
    zq = torch.randn(4, 3, requires_grad=True)
    loss(zq, torch.randn(4, 3)).backward()
    assert loss.log_scale.grad is not None and loss.bias.grad is not None
    assert zq.grad.abs().sum() > 0
    fixed = matching(learnable=False)
    assert not list(fixed.parameters())


def test_matched_pairs_cost_less_and_a_single_pair_has_no_negative():
    loss = matching(learnable=False)
    z = torch.eye(3)
    assert loss(z, z) < loss(z, z[[1, 2, 0]])
    one = loss(torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 0.0]]))
    assert one.item() == pytest.approx(math.log1p(math.exp(-10.0)), rel=1e-5)


def test_errors_and_float32():
    with pytest.raises(ValueError, match="probability"):
        matching(probability="softmax")
    with pytest.raises(ValueError, match="weighting"):
        matching(weighting="sum")
    with pytest.raises(ValueError, match="row i"):
        matching()(torch.randn(3, 2), torch.randn(4, 2))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        value = matching()(ZQ.bfloat16(), ZA.bfloat16())
    assert value.dtype == torch.float32
