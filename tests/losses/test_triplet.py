import pytest
import torch

from retrieval_qa.losses.triplet import (
    BatchHardTripletLoss,
    batch_hard_indices,
    batch_hard_triplet_loss,
    pairwise_distances,
)


def _slow_reference(q, p, yq, yp, margin, squared=False):
    """Plain loops: every anchor's farthest same-label and nearest other-label candidate."""
    terms = []
    for i in range(q.shape[0]):
        pos, neg = [], []
        for j in range(p.shape[0]):
            d = (q[i] - p[j]).pow(2).sum()
            d = d if squared else d.sqrt()
            (pos if yq[i] == yp[j] else neg).append(d)
        if pos and neg:
            terms.append(torch.clamp(max(pos) - min(neg) + margin, min=0.0))
    return torch.stack(terms).mean()


def test_picks_the_hardest_positive_and_negative_by_hand():
    q = torch.tensor([[0.0, 0.0]])
    p = torch.tensor([[1.0, 0.0], [3.0, 0.0], [2.0, 0.0], [0.5, 0.0]])
    yq, yp = torch.tensor([7]), torch.tensor([7, 7, 9, 9])
    pos, neg = batch_hard_indices(q, p, yq, yp, squared=False)
    assert pos.tolist() == [1] and neg.tolist() == [3]   # farthest 7 (d=3), nearest 9 (d=0.5)
    loss = batch_hard_triplet_loss(q, p, yq, yp, margin=0.1, squared=False)
    assert loss.item() == pytest.approx(3.0 - 0.5 + 0.1)
    assert batch_hard_triplet_loss(q, p, yq, yp, margin=0.1, squared=True).item() == \
        pytest.approx(9.0 - 0.25 + 0.1)


def test_satisfied_triplet_costs_nothing():
    q = torch.tensor([[0.0, 0.0]])
    p = torch.tensor([[0.1, 0.0], [5.0, 0.0]])
    assert batch_hard_triplet_loss(q, p, torch.tensor([1]), torch.tensor([1, 2]),
                                   margin=1.0, squared=False).item() == 0.0


@pytest.mark.parametrize("squared", [False, True])
def test_matches_slow_loop_reference_with_gradients(squared):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(12, 5, generator=g, requires_grad=True)
    p = torch.randn(12, 5, generator=g, requires_grad=True)
    yq = torch.randint(0, 4, (12,), generator=g)
    yp = yq.clone()  # batch of (question, its paragraph) pairs; labels repeat across rows
    fast = batch_hard_triplet_loss(q, p, yq, yp, margin=0.5, squared=squared)
    gq, gp = torch.autograd.grad(fast, (q, p))
    slow = _slow_reference(q, p, yq, yp, 0.5, squared)
    sq, sp = torch.autograd.grad(slow, (q, p))
    assert fast.item() == pytest.approx(slow.item(), rel=1e-5)
    torch.testing.assert_close(gq, sq, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(gp, sp, rtol=1e-4, atol=1e-5)


def test_anchor_without_negative_is_left_out_and_all_such_is_an_error():
    q = torch.zeros(2, 3)
    p = torch.ones(2, 3)
    with pytest.raises(ValueError, match="no anchor"):
        batch_hard_triplet_loss(q, p, torch.tensor([1, 1]), torch.tensor([1, 1]),
                                margin=0.2, squared=False)
    assert batch_hard_triplet_loss(q, p, torch.tensor([1, 2]), torch.tensor([1, 3]),
                                   margin=0.2, squared=False, reduction="none").shape == (1,)


def test_distances_finite_gradient_at_zero():
    a = torch.ones(2, 4, requires_grad=True)
    d = pairwise_distances(a, a.detach(), squared=False)
    d.sum().backward()
    assert torch.isfinite(a.grad).all()
    torch.testing.assert_close(d, torch.cdist(a, a).detach(), atol=1e-5, rtol=0)


def test_module_rejects_negative_margin():
    with pytest.raises(ValueError):
        BatchHardTripletLoss(margin=-1, squared=False)
