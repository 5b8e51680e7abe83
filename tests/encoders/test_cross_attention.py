"""CrossAttentionBlock (ENDX eqs. 2-4): shapes, masks, exact math."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from retrieval_qa.encoders.cross_attention import CrossAttentionBlock

H = 16


def _block(**kw) -> CrossAttentionBlock:
    torch.manual_seed(0)
    kw = {"num_heads": 4, "ffn_dim": None, "dropout": 0.0, "activation": "relu", **kw}
    return CrossAttentionBlock(H, **kw).eval()


@pytest.mark.parametrize(("n", "m"), [(5, 9), (9, 3)])
def test_output_follows_guide_length(n: int, m: int) -> None:
    block = _block()
    refined, guide = torch.randn(2, n, H), torch.randn(2, m, H)
    refined_mask = torch.ones(2, n, dtype=torch.long)
    guide_mask = torch.ones(2, m, dtype=torch.long)
    guide_mask[1, -1] = 0
    out, out_mask = block(refined, refined_mask, guide, guide_mask)
    assert out.shape == (2, m, H)
    assert out_mask.shape == (2, m) and out_mask.dtype == torch.bool
    assert torch.equal(out_mask, guide_mask.bool())
    assert torch.all(out[1, -1] == 0)  # padded guide rows are zeroed
    assert torch.isfinite(out).all()


def test_refined_padding_does_not_change_outputs() -> None:
    block = _block()
    n, m, pad = 5, 7, 4
    refined, guide = torch.randn(2, n, H), torch.randn(2, m, H)
    out, _ = block(refined, torch.ones(2, n), guide, torch.ones(2, m))
    # Append padding with garbage values to the refined text.
    padded = torch.cat([refined, 100 * torch.randn(2, pad, H)], dim=1)
    mask = torch.cat([torch.ones(2, n), torch.zeros(2, pad)], dim=1)
    out_padded, _ = block(padded, mask, guide, torch.ones(2, m))
    torch.testing.assert_close(out_padded, out, atol=1e-6, rtol=1e-5)
    # Changing only the garbage changes nothing either.
    padded2 = padded.clone()
    padded2[:, n:] = -50.0
    out_padded2, _ = block(padded2, mask, guide, torch.ones(2, m))
    torch.testing.assert_close(out_padded2, out, atol=1e-6, rtol=1e-5)


def test_guide_padding_does_not_change_real_rows() -> None:
    block = _block()
    refined, guide = torch.randn(1, 6, H), torch.randn(1, 4, H)
    out, _ = block(refined, None, guide, None)
    guide_padded = torch.cat([guide, torch.randn(1, 3, H)], dim=1)
    out_p, mask_p = block(refined, None, guide_padded, torch.tensor([[1, 1, 1, 1, 0, 0, 0]]))
    torch.testing.assert_close(out_p[:, :4], out, atol=1e-6, rtol=1e-5)
    assert torch.all(out_p[:, 4:] == 0) and mask_p.sum() == 4


def test_matches_reference_equations() -> None:
    """Queries from the guide, keys/values from the refined text, eqs. 2-4 written out."""
    block = _block(num_heads=2, ffn_dim=8)
    refined, guide = torch.randn(1, 5, H), torch.randn(1, 3, H)
    out, _ = block(refined, None, guide, None)
    d_h = H // 2
    heads = []
    for i in range(2):
        sl = slice(i * d_h, (i + 1) * d_h)
        q = F.linear(guide[0], block.w_q.weight[sl], block.w_q.bias[sl])
        k = F.linear(refined[0], block.w_k.weight[sl], block.w_k.bias[sl])
        v = F.linear(refined[0], block.w_v.weight[sl], block.w_v.bias[sl])
        heads.append(torch.softmax(q @ k.T / math.sqrt(d_h), dim=-1) @ v)
    h_prime = block.w_o(torch.cat(heads, dim=-1))
    expected = F.layer_norm(
        h_prime + block.ffn(h_prime), (H,), block.layer_norm.weight, block.layer_norm.bias
    )
    torch.testing.assert_close(out[0], expected, atol=1e-5, rtol=1e-5)


def test_fully_padded_refined_text_gives_finite_output() -> None:
    block = _block()
    out, _ = block(torch.randn(2, 4, H), torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]]),
                   torch.randn(2, 3, H), None)
    assert torch.isfinite(out).all()


def test_num_heads_must_divide_hidden_size() -> None:
    with pytest.raises(ValueError, match="divisible"):
        CrossAttentionBlock(10, num_heads=3, ffn_dim=None, dropout=0.1, activation="relu")
    CrossAttentionBlock(768, num_heads=12, ffn_dim=None, dropout=0.1,  # the paper's setting
                        activation="relu")


def test_gradients_flow_to_both_inputs() -> None:
    block = _block()
    refined = torch.randn(2, 5, H, requires_grad=True)
    guide = torch.randn(2, 3, H, requires_grad=True)
    out, _ = block(refined, None, guide, None)
    (out * torch.randn_like(out)).sum().backward()  # plain sum of a LayerNorm output is constant
    assert refined.grad is not None and refined.grad.abs().sum() > 0
    assert guide.grad is not None and guide.grad.abs().sum() > 0
