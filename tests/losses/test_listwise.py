"""The grouped softmax loss equals a per-group cross-entropy written out."""

import pytest
import torch
import torch.nn.functional as F

from retrieval_qa.losses.listwise import grouped_softmax_loss


def test_equals_the_cross_entropy_of_each_group():
    logits = torch.tensor([2.0, 0.5, -1.0, 0.3, 3.0, 1.0, 1.0, 0.2, 0.0], requires_grad=True)
    group = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    labels = torch.tensor([1, 0, 0, 0, 1, 0, 0, 0, 1])
    loss = grouped_softmax_loss(logits, group, labels)
    expected = torch.stack([
        F.cross_entropy(logits[:3].unsqueeze(0), torch.tensor([0])),
        F.cross_entropy(logits[3:5].unsqueeze(0), torch.tensor([1])),
        F.cross_entropy(logits[5:].unsqueeze(0), torch.tensor([3]))]).mean()
    torch.testing.assert_close(loss, expected)
    loss.backward()
    assert logits.grad[0] < 0 and logits.grad[1] > 0  # the gold is pushed up, the rest down


def test_large_logits_stay_finite_and_a_group_without_one_gold_is_an_error():
    big = grouped_softmax_loss(torch.tensor([1000.0, 990.0]), torch.tensor([0, 0]),
                               torch.tensor([1, 0]))
    torch.testing.assert_close(big, torch.log1p(torch.exp(torch.tensor(-10.0))))
    with pytest.raises(ValueError, match="exactly one gold row"):
        grouped_softmax_loss(torch.zeros(3), torch.tensor([0, 0, 1]), torch.tensor([1, 1, 0]))


def test_an_empty_batch_is_an_error_not_a_nan():
    empty = torch.zeros(0)
    with pytest.raises(ValueError, match="no rows"):
        grouped_softmax_loss(empty, empty.long(), empty.long())


def test_an_empty_batch_names_its_shape_and_bad_groups_or_labels_are_named():
    empty = torch.zeros(0)
    with pytest.raises(ValueError, match=r"logits of shape \(0,\): no rows"):
        grouped_softmax_loss(empty, empty.long(), empty.long())
    with pytest.raises(ValueError, match="must have one shape"):
        grouped_softmax_loss(torch.zeros(3), torch.tensor([0, 0]), torch.tensor([1, 0, 0]))
    with pytest.raises(ValueError, match="group holds -1"):
        grouped_softmax_loss(torch.zeros(2), torch.tensor([-1, 0]), torch.tensor([1, 1]))
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        grouped_softmax_loss(torch.zeros(2), torch.tensor([0, 0]), torch.tensor([2, 0]))
    # the reranker's float labels (its collate's) are accepted
    loss = grouped_softmax_loss(torch.zeros(2), torch.tensor([0, 0]), torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(loss, torch.log(torch.tensor(2.0)))
