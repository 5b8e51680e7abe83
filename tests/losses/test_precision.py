"""The losses compute in float32 inside autocast (bf16-mixed / 16-mixed training)."""

import pytest
import torch
from helpers import softmax_loss

from retrieval_qa.losses.gam import GeometryAlignmentLoss as GamLoss
from retrieval_qa.losses.precision import float32_region

BF16 = dict(device_type="cpu", dtype=torch.bfloat16)


def _embeddings(seed=0, batch=16, dim=32, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    return [scale * torch.randn(batch, dim, generator=g, requires_grad=True) for _ in range(4)]


def test_autocast_would_round_a_plain_product_to_bf16():
    # the hazard the losses guard against: .float() does not survive autocast
    q, a, _, _ = _embeddings()
    with torch.autocast(**BF16):
        assert (q.float() @ a.float().T).dtype == torch.bfloat16
        with float32_region(q, a) as (q32, a32):
            assert (q32 @ a32.T).dtype == torch.float32


@pytest.mark.parametrize("similarity, scale", [("dot", 1.0), ("cosine", 20.0)])
def test_in_batch_softmax_is_the_same_inside_autocast(similarity, scale):
    q, a, _, _ = _embeddings()
    loss = softmax_loss(similarity=similarity, scale=scale)
    weights = torch.linspace(0.2, 1.0, q.shape[0])
    plain = loss(q, a, weights)
    plain_grad = torch.autograd.grad(plain, q)[0]
    with torch.autocast(**BF16):
        mixed = loss(q, a, weights)
        assert loss.scores(q, a).dtype == torch.float32
        assert loss.score_space(q).dtype == torch.float32
    mixed_grad = torch.autograd.grad(mixed, q)[0]
    assert mixed.dtype == torch.float32
    torch.testing.assert_close(mixed, plain, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(mixed_grad, plain_grad, rtol=1e-5, atol=1e-7)


def test_in_batch_softmax_takes_bf16_embeddings_and_scores_them_in_float32():
    q, a, _, _ = _embeddings()
    loss = softmax_loss()
    with torch.autocast(**BF16):
        mixed = loss(q.bfloat16(), a.bfloat16())
    torch.testing.assert_close(mixed, loss(q.bfloat16().float(), a.bfloat16().float()))


def test_gam_total_with_paper_weights_is_the_same_inside_autocast():
    dual_q, dual_a, cross_q, cross_a = _embeddings(scale=6.0)
    gam = GamLoss(kernel="inner_product", sigma=1.0, exclude_self=False, detach_cross=False)
    weights = {"q|q": 1e4, "a|a": 1e4, "a|q": 0.5, "q|a": 0.5}
    plain, plain_terms = gam(dual_q, dual_a, cross_q, cross_a, weights)
    with torch.autocast(**BF16):
        mixed, mixed_terms = gam(dual_q, dual_a, cross_q, cross_a, weights)
    assert mixed.dtype == torch.float32
    torch.testing.assert_close(mixed, plain, rtol=1e-6, atol=1e-4)
    for key in plain_terms:
        torch.testing.assert_close(mixed_terms[key], plain_terms[key], rtol=1e-6, atol=1e-7)
