"""Token reconstruction cross-entropy: padding masked, per-text sums or per-token mean,
sequence logits [B, T, V] and bag-of-words logits [B, V]."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from retrieval_qa.losses.reconstruction import TokenReconstructionLoss, token_nll


def example():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5)
    targets = torch.tensor([[1, 4, 2], [3, 0, 0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]], dtype=torch.bool)
    return logits, targets, mask


def test_sequence_reduction_sums_each_text_and_averages_texts():
    logits, targets, mask = example()
    ce = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none").view(2, 3)
    expected = (ce[0].sum() + ce[1, 0]) / 2
    assert TokenReconstructionLoss(reduction="sequence")(logits, targets, mask).item() == pytest.approx(
        expected.item(), rel=1e-6)
    per_token = (ce[0].sum() + ce[1, 0]) / 4
    assert TokenReconstructionLoss(reduction="token")(logits, targets, mask).item() == pytest.approx(
        per_token.item(), rel=1e-6)


def test_padding_is_masked_whatever_its_logits_and_ids():
    logits, targets, mask = example()
    loss = TokenReconstructionLoss(reduction="sequence")(logits, targets, mask)
    noisy = logits.clone()
    noisy[1, 1:] = 100 * torch.randn(2, 5)
    other = targets.clone()
    other[1, 1:] = 4
    assert TokenReconstructionLoss(reduction="sequence")(noisy, other, mask).item() == pytest.approx(loss.item())
    uniform = torch.zeros(1, 2, 5)
    assert TokenReconstructionLoss(reduction="sequence")(uniform, torch.tensor([[1, 2]]),
                                     torch.ones(1, 2, dtype=torch.bool)).item() == pytest.approx(
        2 * math.log(5))


def test_bag_of_words_logits_score_every_position_with_one_distribution():
    torch.manual_seed(1)
    bag = torch.randn(2, 5)
    _, targets, mask = example()
    repeated = bag.unsqueeze(1).expand(2, 3, 5)
    assert torch.allclose(token_nll(bag, targets, mask), token_nll(repeated, targets, mask))
    log_p = torch.log_softmax(bag, -1)
    expected = -(log_p[0, 1] + log_p[0, 4] + log_p[0, 2] + log_p[1, 3]) / 2
    assert TokenReconstructionLoss(reduction="sequence")(bag, targets, mask).item() == pytest.approx(
        expected.item(), rel=1e-6)


def test_errors_and_float32():
    with pytest.raises(ValueError, match="reduction"):
        TokenReconstructionLoss(reduction="sum")
    with pytest.raises(ValueError, match="do not match"):
        token_nll(torch.zeros(2, 4, 5), torch.zeros(2, 3, dtype=torch.long),
                  torch.ones(2, 3, dtype=torch.bool))
    logits, targets, mask = example()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = TokenReconstructionLoss(reduction="sequence")(logits.bfloat16(), targets, mask)
    assert loss.dtype == torch.float32
