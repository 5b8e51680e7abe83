"""InBatchSoftmaxLoss against hand computations, and across 2 CPU processes (gloo)."""

from __future__ import annotations

import copy
import math
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from helpers import softmax_loss
from torch import nn


def nll(row: list[float], target: int) -> float:
    """-log softmax(row)[target], by hand."""
    return -(row[target] - math.log(sum(math.exp(s) for s in row)))


def test_dot_2x2_by_hand():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    a = torch.tensor([[2.0, 0.0], [1.0, 1.0]])
    # scores [[2, 1], [0, 1]]
    expected = (-math.log(math.exp(2) / (math.exp(2) + math.exp(1)))
                - math.log(math.exp(1) / (math.exp(0) + math.exp(1)))) / 2
    assert softmax_loss()(q, a).item() == pytest.approx(expected, rel=1e-6)
    scaled = softmax_loss(scale=3.0)(q, a).item()
    assert scaled == pytest.approx((nll([6, 3], 0) + nll([0, 3], 1)) / 2, rel=1e-6)


def test_cosine_with_scale_3x3_by_hand():
    q = torch.tensor([[3.0, 4.0], [1.0, 0.0], [0.0, -2.0]])
    a = torch.tensor([[6.0, 8.0], [0.0, 5.0], [1.0, -1.0]])
    qn = [[0.6, 0.8], [1.0, 0.0], [0.0, -1.0]]
    an = [[0.6, 0.8], [0.0, 1.0], [1 / math.sqrt(2), -1 / math.sqrt(2)]]
    scale = 20.0
    rows = [[scale * sum(x * y for x, y in zip(qi, aj, strict=True)) for aj in an] for qi in qn]
    expected = sum(nll(rows[i], i) for i in range(3)) / 3
    loss = softmax_loss(similarity="cosine", scale=scale)
    assert loss(q, a).item() == pytest.approx(expected, rel=1e-5)
    assert loss.temperature == pytest.approx(0.05)


def test_weights_by_hand():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    a = torch.tensor([[1.0, 2.0], [0.5, 0.0], [0.0, 1.0]])
    rows = [[sum(x * y for x, y in zip(qi, aj, strict=True)) for aj in a.tolist()]
            for qi in q.tolist()]
    losses = [nll(rows[i], i) for i in range(3)]
    w = [1.0, 0.25, 0.64]  # a gold pair, and mined pairs with p = 0.5 and p = 0.8 (weight p^2)
    expected = sum(wi * li for wi, li in zip(w, losses, strict=True)) / 3
    fn = softmax_loss()
    assert fn(q, a, torch.tensor(w)).item() == pytest.approx(expected, rel=1e-6)
    # all-ones weights give the unweighted loss; a zero weight drops the pair's term
    assert fn(q, a, torch.ones(3)).item() == pytest.approx(fn(q, a).item(), rel=1e-6)
    dropped = fn(q, a, torch.tensor([1.0, 0.0, 1.0])).item()
    assert dropped == pytest.approx((losses[0] + losses[2]) / 3, rel=1e-6)


def _stable_nll(row: list[float], target: int) -> float:
    top = max(row)
    return -(row[target] - top - math.log(sum(math.exp(s - top) for s in row)))


def test_supervised_mining_eq2_3x3_by_hand():
    """Eq. 2 of the supervised-mining paper: l2-normalised embeddings, scores x100, a gold
    pair (weight 1) and mined pairs with p = 0.5 and p = 0.9 (weights p^2 = 0.25, 0.81)."""
    q = torch.tensor([[2.0, 0.0], [0.3, 0.4], [1.0, 1.0]])
    a = torch.tensor([[0.99, 0.1], [0.6, 0.85], [0.7, 0.72]])
    norm = lambda v: [x / math.sqrt(sum(y * y for y in v)) for x in v]  # noqa: E731
    qn, an = [norm(v) for v in q.tolist()], [norm(v) for v in a.tolist()]
    rows = [[100.0 * sum(x * y for x, y in zip(qi, aj, strict=True)) for aj in an] for qi in qn]
    losses = [_stable_nll(rows[i], i) for i in range(3)]
    w = [1.0, 0.5 ** 2, 0.9 ** 2]
    assert w == [1.0, 0.25, 0.81]
    fn = softmax_loss(similarity="cosine", scale=100.0)
    expected = sum(wi * li for wi, li in zip(w, losses, strict=True)) / 3
    assert fn(q, a, torch.tensor(w)).item() == pytest.approx(expected, rel=1e-5)
    plain = sum(losses) / 3
    assert fn(q, a).item() == pytest.approx(plain, rel=1e-5)
    assert fn(q, a, torch.ones(3)).item() == fn(q, a).item()  # exactly the plain loss


def _grads(fn, q, a, w):
    q, a = q.clone().requires_grad_(), a.clone().requires_grad_()
    fn(q, a, w).backward()
    return q.grad, a.grad


def test_weighted_gradients_are_the_pairs_gradients_scaled_by_their_weights():
    """Pair i's share of the gradient is w_i times its share in the plain loss, whatever the
    other weights of the batch (so a batch of mined pairs alone is not scaled back up)."""
    gen = torch.Generator().manual_seed(0)
    q, a = torch.randn(3, 4, generator=gen), torch.randn(3, 4, generator=gen)
    fn = softmax_loss(similarity="cosine", scale=100.0)
    w = torch.tensor([1.0, 0.25, 0.81])
    one_hot = [torch.eye(3)[i] for i in range(3)]
    per_pair = [_grads(fn, q, a, e) for e in one_hot]  # pair i alone, weight 1
    for i in range(3):  # pair i alone, weight w_i: w_i times the gradient at weight 1
        gq, ga = _grads(fn, q, a, w[i] * one_hot[i])
        torch.testing.assert_close(gq, w[i] * per_pair[i][0])
        torch.testing.assert_close(ga, w[i] * per_pair[i][1])
    gq, ga = _grads(fn, q, a, w)  # the batch: the weighted sum of the pairs' gradients
    torch.testing.assert_close(gq, sum(wi * g[0] for wi, g in zip(w, per_pair, strict=True)))
    torch.testing.assert_close(ga, sum(wi * g[1] for wi, g in zip(w, per_pair, strict=True)))
    plain_q, plain_a = _grads(fn, q, a, None)  # all weights 1: the plain gradients
    ones_q, ones_a = _grads(fn, q, a, torch.ones(3))
    torch.testing.assert_close(ones_q, plain_q)
    torch.testing.assert_close(ones_a, plain_a)
    low_q, _ = _grads(fn, q, a, torch.full((3,), 0.25))  # a batch of p = 0.5 pairs only
    torch.testing.assert_close(low_q, 0.25 * plain_q)


def test_symmetric_by_hand():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    a = torch.tensor([[2.0, 0.0], [1.0, 1.0], [0.0, 3.0]])
    s = [[sum(x * y for x, y in zip(qi, aj, strict=True)) for aj in a.tolist()]
         for qi in q.tolist()]
    q_to_a = [nll(s[i], i) for i in range(3)]
    a_to_q = [nll([s[i][j] for i in range(3)], j) for j in range(3)]
    expected = sum((x + y) / 2 for x, y in zip(q_to_a, a_to_q, strict=True)) / 3
    assert softmax_loss(symmetric=True)(q, a).item() == pytest.approx(expected, rel=1e-6)
    w = [1.0, 0.5, 0.2]
    weighted = sum(wi * (x + y) / 2 for wi, x, y in zip(w, q_to_a, a_to_q, strict=True)) / 3
    got = softmax_loss(symmetric=True)(q, a, torch.tensor(w)).item()
    assert got == pytest.approx(weighted, rel=1e-6)


def test_extra_hard_negatives_by_hand():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    a = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0], [0.0, -1.0]])  # 2 positives + 2 negatives
    s = [[sum(x * y for x, y in zip(qi, aj, strict=True)) for aj in a.tolist()]
         for qi in q.tolist()]  # [[1, 0, 3, 0], [0, 2, 0, -1]]
    expected = (nll(s[0], 0) + nll(s[1], 1)) / 2
    assert softmax_loss()(q, a).item() == pytest.approx(expected, rel=1e-6)
    # symmetric: the answer->question side has only the B positives as rows, over B questions
    back = (nll([s[0][0], s[1][0]], 0) + nll([s[0][1], s[1][1]], 1)) / 2
    got = softmax_loss(symmetric=True)(q, a).item()
    assert got == pytest.approx((expected + back) / 2, rel=1e-6)


def test_gradients_match_a_loop_reference():
    torch.manual_seed(0)
    q = torch.randn(4, 3, requires_grad=True)
    a = torch.randn(6, 3, requires_grad=True)
    w = torch.rand(4) + 0.1
    loss = softmax_loss(similarity="cosine", scale=5.0, symmetric=True)(q, a, w)
    loss.backward()
    q2, a2 = q.detach().clone().requires_grad_(), a.detach().clone().requires_grad_()
    qn, an = q2 / q2.norm(dim=1, keepdim=True), a2 / a2.norm(dim=1, keepdim=True)
    total = 0.0
    for i in range(4):
        forward = -torch.log_softmax(torch.stack([5.0 * qn[i] @ an[j] for j in range(6)]), 0)[i]
        backward = -torch.log_softmax(torch.stack([5.0 * qn[k] @ an[i] for k in range(4)]), 0)[i]
        total = total + w[i] * (forward + backward) / 2
    (total / 4).backward()  # eq. 2: weighted terms, averaged over the batch's 4 pairs
    torch.testing.assert_close(loss, (total / 4).detach())
    torch.testing.assert_close(q.grad, q2.grad)
    torch.testing.assert_close(a.grad, a2.grad)


def test_low_precision_inputs_give_a_float32_loss():
    q = torch.randn(3, 4).to(torch.bfloat16)
    a = torch.randn(3, 4).to(torch.bfloat16)
    loss = softmax_loss(similarity="cosine", scale=100.0)(q, a)
    assert loss.dtype == torch.float32 and torch.isfinite(loss)


def test_gather_flag_without_distributed_is_the_plain_loss():
    q, a = torch.randn(3, 4), torch.randn(5, 4)
    plain = softmax_loss(gather_across_processes=False)(q, a)
    gathered = softmax_loss(gather_across_processes=True)(q, a)
    torch.testing.assert_close(plain, gathered)


def test_invalid_inputs():
    with pytest.raises(ValueError, match="similarity"):
        softmax_loss(similarity="l2")
    with pytest.raises(ValueError, match="scale"):
        softmax_loss(scale=0.0)
    fn = softmax_loss()
    with pytest.raises(ValueError, match="at least one answer"):
        fn(torch.randn(3, 4), torch.randn(2, 4))
    with pytest.raises(ValueError, match=r"q\[B, D\]"):
        fn(torch.randn(3, 4), torch.randn(3, 5))
    with pytest.raises(ValueError, match="weights"):
        fn(torch.randn(3, 4), torch.randn(3, 4), torch.ones(2))


# --- two processes ---------------------------------------------------------------------

CASES = [
    # (questions per rank, hard negatives per rank, loss options, weighted)
    ([3, 3], [0, 0], {"similarity": "dot", "scale": 1.0}, False),
    ([3, 2], [2, 1], {"similarity": "cosine", "scale": 20.0, "symmetric": True}, True),
]


def _ddp_worker(rank: int, world: int, init_file: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    try:
        for sizes, negatives, options, weighted in CASES:
            _check_case(rank, world, sizes, negatives, options, weighted)
    finally:
        dist.destroy_process_group()
    # Every check passed (a failure raised above). Leave without interpreter finalisation:
    # Gloo's threads can still hold work objects whose teardown then aborts the process at
    # random ("terminate called without an active exception", SIGABRT in about 1 run in 5).
    os._exit(0)


def _check_case(rank, world, sizes, negatives, options, weighted):
    gen = torch.Generator().manual_seed(7)
    n_q, n_neg, dim_in = sum(sizes), sum(negatives), 5
    xq = torch.randn(n_q, dim_in, generator=gen)
    xa = torch.randn(n_q, dim_in, generator=gen)
    xn = torch.randn(n_neg, dim_in, generator=gen)
    w = torch.rand(n_q, generator=gen) + 0.2 if weighted else None
    torch.manual_seed(0)
    encoder = nn.Linear(dim_in, 4)

    # single process over the whole global batch: positives first, then all hard negatives
    reference = copy.deepcopy(encoder)
    ref_q, ref_a = reference(xq), reference(torch.cat([xa, xn]))
    ref_q.retain_grad()
    ref_loss = softmax_loss(**options, gather_across_processes=False)(ref_q, ref_a, w)
    ref_loss.backward()

    # this rank's share; parameter gradients are then averaged over the ranks, as DDP does
    # (DistributedDataParallel itself takes seconds to set up, hence the explicit all_reduce)
    local = copy.deepcopy(encoder)
    q0, n0 = sum(sizes[:rank]), sum(negatives[:rank])
    b, k = sizes[rank], negatives[rank]
    inputs = torch.cat([xq[q0:q0 + b], xa[q0:q0 + b], xn[n0:n0 + k]])
    out = local(inputs)
    q, a = out[:b], out[b:]
    q.retain_grad()
    local_w = w[q0:q0 + b] if w is not None else None
    loss = softmax_loss(**options, gather_across_processes=True)(q, a, local_w)
    loss.backward()
    for param in local.parameters():
        dist.all_reduce(param.grad)
        param.grad /= world

    _close(loss, ref_loss, f"rank {rank}: loss")
    _close(local.weight.grad, reference.weight.grad, f"rank {rank}: weight gradient")
    _close(local.bias.grad, reference.bias.grad, f"rank {rank}: bias gradient")
    # on the local embeddings the gradient is world x the global one (DDP divides it back)
    _close(q.grad, world * ref_q.grad[q0:q0 + b], f"rank {rank}: embedding gradient")


def _close(got: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    # not torch.testing.assert_close: under torch.distributed it imports DTensor (seconds)
    assert torch.allclose(got, expected, rtol=1e-5, atol=1e-6), f"{what}: {got} != {expected}"


def test_two_process_gather_equals_single_process(tmp_path):
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    mp.spawn(_ddp_worker, args=(2, str(tmp_path / "rendezvous")), nprocs=2, join=True)


@pytest.mark.parametrize(("similarity", "scale"), [("dot", 1.0), ("dot", 4.0), ("cosine", 20.0)])
def test_score_space_dot_products_are_the_scores(similarity, scale):
    gen = torch.Generator().manual_seed(0)
    q, a = torch.randn(3, 5, generator=gen), torch.randn(4, 5, generator=gen)
    loss = softmax_loss(similarity=similarity, scale=scale)
    torch.testing.assert_close(loss.score_space(q) @ loss.score_space(a).T, loss.scores(q, a))
