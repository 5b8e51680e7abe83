"""Poolers: shapes, masking, padding invariance and the multi-hop penalty by hand."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import towers_conf

from retrieval_qa.encoders import (
    ClsPooler,
    MeanPooler,
    MultiHopSelfAttentionPooler,
    attention_penalty,
    build_pooler,
)

H = 6


def states_and_mask(lengths, total, seed=0):
    gen = torch.Generator().manual_seed(seed)
    states = torch.randn(len(lengths), total, H, generator=gen)
    mask = torch.zeros(len(lengths), total, dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    return states, mask


@pytest.mark.parametrize(
    ("cfg", "dim"),
    [
        ({"type": "mean"}, H),
        ({"type": "cls"}, H),
        ({"type": "multihop_attention", "hops": 3, "attention_dim": 5, "combine": "concat"}, 3 * H),
        ({"type": "multihop_attention", "hops": 3, "attention_dim": 5, "combine": "mean"}, H),
    ],
)
def test_shapes_and_padding_invariance(cfg, dim):
    pooler = build_pooler(cfg, H)
    assert pooler.output_dim == dim
    states, mask = states_and_mask([4, 2, 1], 4)
    pooled = pooler(states, mask)
    assert pooled.shape == (3, dim)
    # more padding, filled with garbage states, changes nothing
    garbage = torch.randn(3, 5, H) * 100
    longer = pooler(torch.cat([states, garbage], 1), torch.cat([mask, torch.zeros(3, 5).long()], 1))
    torch.testing.assert_close(longer, pooled)
    # garbage in the padded part of the original batch changes nothing either
    noisy = states.masked_fill(~mask.bool().unsqueeze(-1), 1e3)
    torch.testing.assert_close(pooler(noisy, mask), pooled)


def test_mean_and_cls_by_hand():
    states = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    torch.testing.assert_close(MeanPooler(2)(states, mask), torch.tensor([[2.0, 3.0]]))
    torch.testing.assert_close(ClsPooler(2)(states, mask), torch.tensor([[1.0, 2.0]]))
    pooled, penalty = MeanPooler(2).pool(states, mask)
    torch.testing.assert_close(pooled, torch.tensor([[2.0, 3.0]]))
    assert penalty.item() == 0.0


def test_multihop_attention_and_penalty_by_hand():
    """A = softmax(W_s2 tanh(W_s1 H^T)) over real tokens; P = ||A A^T - I||_F^2, batch mean."""
    torch.manual_seed(0)
    pooler = MultiHopSelfAttentionPooler(hidden_size=2, hops=2, attention_dim=2, combine="concat")
    with torch.no_grad():
        pooler.ws1.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
        pooler.ws2.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, -2.0]]))
    states = torch.tensor(
        [[[0.5, 1.0], [-1.0, 0.2], [9.0, 9.0]], [[0.3, -0.4], [0.0, 0.0], [0.0, 0.0]]]
    )
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    pooled, penalty = pooler.pool(states, mask)
    torch.testing.assert_close(pooler(states, mask), pooled)  # forward: the same, no penalty
    attention = pooler.attention(states, mask)

    penalties, expected_rows = [], []
    for b, n in enumerate([2, 1]):
        tokens = states[b, :n].tolist()
        # hop 0 scores tanh(h_0), hop 1 scores -2 tanh(h_1)
        scores = [[math.tanh(t[0]) for t in tokens], [-2 * math.tanh(t[1]) for t in tokens]]
        attn = []
        for row in scores:
            z = sum(math.exp(s) for s in row)
            attn.append([math.exp(s) / z for s in row])
        gram = [[sum(x * y for x, y in zip(ai, aj, strict=True)) for aj in attn] for ai in attn]
        penalties.append(sum((gram[i][j] - (i == j)) ** 2 for i in range(2) for j in range(2)))
        hops = [[sum(w * t[k] for w, t in zip(row, tokens, strict=True)) for k in range(2)]
                for row in attn]
        expected_rows.append(hops[0] + hops[1])  # concat of the hops
        torch.testing.assert_close(attention[b, :, :n], torch.tensor(attn))
        assert attention[b, :, n:].abs().sum() == 0
    torch.testing.assert_close(pooled, torch.tensor(expected_rows))
    expected_penalty = sum(penalties) / 2
    assert penalty.item() == pytest.approx(expected_penalty, rel=1e-6)
    assert penalty.requires_grad  # it trains the attention weights


def test_penalty_extremes_and_gradient():
    # two hops on the same single token: A A^T = ones, ||ones - I||^2 = 2
    same = torch.tensor([[[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]])
    assert attention_penalty(same).item() == pytest.approx(2.0)
    # two hops on distinct tokens: A A^T = I
    distinct = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    assert attention_penalty(distinct).item() == pytest.approx(0.0)
    pooler = MultiHopSelfAttentionPooler(H, hops=4, attention_dim=5, combine="concat")
    states, mask = states_and_mask([4, 3], 4)
    pooler.pool(states, mask)[1].backward()
    assert pooler.ws1.weight.grad is not None and pooler.ws1.weight.grad.abs().sum() > 0


def test_multihop_mean_combine_averages_hops():
    pooler = MultiHopSelfAttentionPooler(H, hops=3, attention_dim=5, combine="mean")
    states, mask = states_and_mask([4, 2], 4)
    pooled = pooler(states, mask)
    expected = (pooler.attention(states, mask) @ states).mean(dim=1)
    torch.testing.assert_close(pooled, expected)


def test_the_pooler_keeps_no_penalty_between_calls():
    """The penalty is returned with the batch, never stored: a copy or a pickle of a pooler
    after a training forward holds no graph."""
    pooler = build_pooler(towers_conf()["pooler"], H)  # conf's multi-hop pooler
    states, mask = states_and_mask([3, 2], 3)
    pooler.pool(states, mask)
    assert not any(torch.is_tensor(v) and v.requires_grad
                   for v in vars(pooler).values() if not isinstance(v, torch.nn.Module))


def test_build_pooler_rejects_unknown_values():
    pooler = towers_conf()["pooler"]
    with pytest.raises(ValueError, match=r"pooler\.type.*multihop_attention"):
        build_pooler({**pooler, "type": "max"}, H)
    with pytest.raises(ValueError, match=r"pooler \(_target_ .*MultiHop.*\): combine='sum'"):
        build_pooler({**pooler, "combine": "sum"}, H)
    with pytest.raises(ValueError, match=r"unknown key.*'heads'"):
        build_pooler({**pooler, "heads": 2}, H)
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'combine'"):
        build_pooler({"type": "multihop_attention", "hops": 2, "attention_dim": 3}, H)
