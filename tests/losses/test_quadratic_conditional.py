import pytest
import torch

from retrieval_qa.losses.quadratic_conditional import (
    QuadraticConditionalLoss,
    conditional_margin,
    quadratic_conditional_loss,
)


def test_conditional_margin_is_eq_1():
    d = torch.tensor([0.1, 0.5, 0.6])
    assert conditional_margin(0.5, d).tolist() == [0.0, 0.0, 0.5]


def test_loss_by_hand():
    q = torch.tensor([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    p = torch.tensor([[0.3, 0.0], [2.0, 0.0], [0.0, 1.0]])
    # d = 0.3 (within m=0.5: 0), 2.0 ([1.5]+ + 0.5 = 2.0), 1.0 ([0.5]+ + 0.5 = 1.0)
    per = quadratic_conditional_loss(q, p, margin=0.5, squared=False, reduction="none")
    torch.testing.assert_close(per, torch.tensor([0.0, 2.0, 1.0]))
    assert QuadraticConditionalLoss(margin=0.5, squared=False)(q, p).item() == pytest.approx(1.0)
    sq = quadratic_conditional_loss(q, p, margin=0.5, squared=True, reduction="none")
    torch.testing.assert_close(sq, torch.tensor([0.0, 4.0, 1.0]))


def test_gradient_pulls_far_pairs_only():
    q = torch.tensor([[0.0, 0.0], [0.0, 0.0]], requires_grad=True)
    p = torch.tensor([[0.1, 0.0], [3.0, 0.0]])
    quadratic_conditional_loss(q, p, margin=0.5, squared=False).backward()
    assert q.grad[0].abs().sum() == 0 and q.grad[1, 0] < 0
