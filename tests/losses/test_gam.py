"""Geometry Alignment Mechanism (ENDX eqs. 6-12) against hand computations."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from retrieval_qa.losses.gam import (
    GeometryAlignmentLoss,
    log_neighbour_probabilities,
    neighbour_probabilities,
    relation_kl,
)
from retrieval_qa.registry import config_values
from retrieval_qa.training.compose import load_group

#: conf/model/endx.yaml's GAM settings (the paper's; their one source)
PAPER = {k: v for k, v in config_values(load_group("model", "endx").gam).items()
         if k in ("kernel", "sigma", "exclude_self", "detach_cross")}
KERNEL = {k: PAPER[k] for k in ("kernel", "sigma", "exclude_self")}


def gam_loss(**kw) -> GeometryAlignmentLoss:
    return GeometryAlignmentLoss(**{**PAPER, **kw})


def probs(x, y, **kw) -> torch.Tensor:
    return neighbour_probabilities(x, y, **{**KERNEL, **kw})


def log_probs(x, y, **kw) -> torch.Tensor:
    return log_neighbour_probabilities(x, y, **{**KERNEL, **kw})


KEYS = ("q|q", "a|a", "a|q", "q|a")
ONES = dict.fromkeys(KEYS, 1.0)

# 3x3 example (D = 2), small integers so every kernel value is written out by hand below.
CROSS_Q = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
CROSS_A = [[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]]
DUAL_Q = [[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]]
DUAL_A = [[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]


def _t(x) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64)


def _softmax(logits: list[float]) -> list[float]:
    z = sum(math.exp(v) for v in logits)
    return [math.exp(v) / z for v in logits]


def _kl(cross_logits: list[float], dual_logits: list[float]) -> float:
    p, q = _softmax(cross_logits), _softmax(dual_logits)
    return sum(pi * math.log(pi / qi) for pi, qi in zip(p, q, strict=True))


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def _terms(**kw) -> dict[str, torch.Tensor]:
    gam = gam_loss(**kw)
    _, terms = gam.compute_loss_from_embeddings(
        _t(DUAL_Q), _t(DUAL_A), _t(CROSS_Q), _t(CROSS_A), ONES
    )
    return terms


def test_a_given_q_hand_computation() -> None:
    # Anchor q_i, neighbours a_j, logits q_i . a_j.
    cross = [[1, 0, 0], [0, 2, 0], [1, 2, 0]]
    dual = [[1, 0, 1], [1, 1, 0], [0, 0, 0]]
    expected = _mean([_kl(c, d) for c, d in zip(cross, dual, strict=True)])
    assert _terms()["a|q"].item() == pytest.approx(expected, abs=1e-12)


def test_q_given_a_hand_computation() -> None:
    # Anchor a_i, neighbours q_j, logits a_i . q_j.
    cross = [[1, 0, 1], [0, 2, 2], [0, 0, 0]]
    dual = [[1, 1, 0], [0, 1, 0], [1, 0, 0]]
    expected = _mean([_kl(c, d) for c, d in zip(cross, dual, strict=True)])
    assert _terms()["q|a"].item() == pytest.approx(expected, abs=1e-12)
    assert expected > 0


def test_q_given_q_hand_computation_with_and_without_self() -> None:
    # Cross q_i . q_j = [[1,0,1],[0,1,1],[1,1,2]]; dual q_i . q_j = [[1,0,0],[0,1,0],[0,0,0]].
    excl_cross = [[0, 1], [0, 1], [1, 1]]  # diagonal removed
    excl_dual = [[0, 0], [0, 0], [0, 0]]
    expected_excl = _mean([_kl(c, d) for c, d in zip(excl_cross, excl_dual, strict=True)])
    assert _terms(exclude_self=True)["q|q"].item() == pytest.approx(expected_excl, abs=1e-12)
    incl_cross = [[1, 0, 1], [0, 1, 1], [1, 1, 2]]
    incl_dual = [[1, 0, 0], [0, 1, 0], [0, 0, 0]]
    expected_incl = _mean([_kl(c, d) for c, d in zip(incl_cross, incl_dual, strict=True)])
    assert _terms()["q|q"].item() == pytest.approx(expected_incl, abs=1e-12)  # default
    assert expected_excl != pytest.approx(expected_incl)


def test_a_given_a_hand_computation() -> None:
    # Cross a_i . a_j = [[1,0,0],[0,4,0],[0,0,0]]; dual = [[2,1,1],[1,1,0],[1,0,1]].
    excl_cross = [[0, 0], [0, 0], [0, 0]]
    excl_dual = [[1, 1], [1, 0], [1, 0]]
    expected = _mean([_kl(c, d) for c, d in zip(excl_cross, excl_dual, strict=True)])
    assert _terms(exclude_self=True)["a|a"].item() == pytest.approx(expected, abs=1e-12)
    incl_cross = [[1, 0, 0], [0, 4, 0], [0, 0, 0]]
    incl_dual = [[2, 1, 1], [1, 1, 0], [1, 0, 1]]
    expected = _mean([_kl(c, d) for c, d in zip(incl_cross, incl_dual, strict=True)])
    assert _terms()["a|a"].item() == pytest.approx(expected, abs=1e-12)


def test_total_is_weighted_sum_eq12() -> None:
    gam = gam_loss()
    weights = {"q|q": 1e4, "a|a": 2.0, "a|q": 0.5, "q|a": 0.25}
    total, terms = gam.compute_loss_from_embeddings(
        _t(DUAL_Q), _t(DUAL_A), _t(CROSS_Q), _t(CROSS_A), weights
    )
    assert set(terms) == set(KEYS)
    expected = sum(weights[k] * terms[k].item() for k in KEYS)
    assert total.item() == pytest.approx(expected, rel=1e-12)
    # Missing keys count as weight 0 but all terms are still reported.
    total_aq, terms_aq = gam.compute_loss_from_embeddings(
        _t(DUAL_Q), _t(DUAL_A), _t(CROSS_Q), _t(CROSS_A), {"a|q": 1.0}
    )
    assert set(terms_aq) == set(KEYS)
    assert total_aq.item() == pytest.approx(terms["a|q"].item())
    with pytest.raises(KeyError):
        gam.compute_loss_from_embeddings(
            _t(DUAL_Q), _t(DUAL_A), _t(CROSS_Q), _t(CROSS_A), {"q|x": 1.0}
        )


def test_kl_matches_torch_batchmean() -> None:
    torch.manual_seed(0)
    cq, ca, dq, da = (torch.randn(6, 4, dtype=torch.float64) for _ in range(4))
    ours = relation_kl(cq, ca, dq, da, **KERNEL)
    ref = F.kl_div(
        log_probs(dq, da), log_probs(cq, ca),
        reduction="batchmean", log_target=True,
    )
    torch.testing.assert_close(ours, ref)


@pytest.mark.parametrize("kernel", ["inner_product", "gaussian", "gaussian_literal"])
def test_zero_for_identical_geometry(kernel: str) -> None:
    torch.manual_seed(0)
    dual_q, dual_a = torch.randn(8, 5), torch.randn(8, 5)
    gam = gam_loss(kernel=kernel, sigma=1.5)
    total, terms = gam.compute_loss_from_embeddings(dual_q, dual_a, dual_q.clone(), dual_a.clone(), ONES)
    assert abs(total.item()) < 1e-6
    assert all(abs(v.item()) < 1e-6 for v in terms.values())


@pytest.mark.parametrize("kernel", ["inner_product", "gaussian"])
def test_zero_for_rotated_embeddings(kernel: str) -> None:
    """Geometry (not coordinates) is compared: an orthogonal map of both sides costs nothing."""
    torch.manual_seed(0)
    dual_q, dual_a = torch.randn(8, 5, dtype=torch.float64), torch.randn(8, 5, dtype=torch.float64)
    rot, _ = torch.linalg.qr(torch.randn(5, 5, dtype=torch.float64))
    gam = gam_loss(kernel=kernel)
    total, terms = gam.compute_loss_from_embeddings(dual_q, dual_a, dual_q @ rot, dual_a @ rot, ONES)
    assert all(abs(v.item()) < 1e-6 for v in terms.values())
    assert abs(total.item()) < 1e-6


@pytest.mark.parametrize("kernel", ["inner_product", "gaussian"])
def test_positive_for_different_geometry(kernel: str) -> None:
    torch.manual_seed(1)
    emb = [torch.randn(8, 5) for _ in range(4)]
    _, terms = gam_loss(kernel=kernel).compute_loss_from_embeddings(*emb, ONES)
    assert all(v.item() > 1e-4 for v in terms.values())


def test_neighbour_probabilities_orientation_and_exclude_self() -> None:
    x, y = _t([[1.0, 0.0], [0.0, 1.0]]), _t([[2.0, 0.0], [0.0, 0.0], [0.0, 1.0]])
    p = probs(x, y)  # P[i, j] = p(y_j | x_i), rows over y
    assert p.shape == (2, 3)
    torch.testing.assert_close(p.sum(-1), torch.ones(2, dtype=torch.float64))
    assert p[0].tolist() == pytest.approx(_softmax([2.0, 0.0, 0.0]))
    assert p[1].tolist() == pytest.approx(_softmax([0.0, 0.0, 1.0]))

    z = _t(CROSS_Q)
    p_excl = probs(z, z, exclude_self=True)
    assert torch.all(p_excl.diagonal() == 0)
    torch.testing.assert_close(p_excl.sum(-1), torch.ones(3, dtype=torch.float64))
    assert torch.isneginf(log_probs(z, z, exclude_self=True).diagonal()).all()
    assert torch.all(probs(z, z, exclude_self=False).diagonal() > 0)
    with pytest.raises(ValueError):
        probs(x, y, exclude_self=True)  # not square
    with pytest.raises(ValueError):
        probs(z[:1], z[:1], exclude_self=True)  # no neighbour left


def test_exclude_self_only_affects_self_relations() -> None:
    on, off = _terms(exclude_self=True), _terms(exclude_self=False)
    # exact: the cross-side terms are the same computation either way
    assert on["a|q"].item() == off["a|q"].item()
    assert on["q|a"].item() == off["q|a"].item()
    assert on["q|q"].item() != off["q|q"].item()
    assert PAPER["exclude_self"] is False  # the paper sums over all k


def test_gaussian_kernel_hand_computation() -> None:
    x = _t([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    # Squared distances from x_0: [0, 1, 4]; from x_2: [4, 5, 0].
    p = probs(x, x, kernel="gaussian", sigma=1.0)
    assert p[0].tolist() == pytest.approx(_softmax([0.0, -1 / 2, -4 / 2]))
    assert p[2].tolist() == pytest.approx(_softmax([-4 / 2, -5 / 2, 0.0]))
    # Proportional to exp(-d^2 / (2 sigma^2)) with sigma = 2.
    p2 = probs(x, x, kernel="gaussian", sigma=2.0)
    k = [math.exp(-d / 8) for d in (0.0, 1.0, 4.0)]
    assert p2[0].tolist() == pytest.approx([v / sum(k) for v in k])
    # exclude_self: renormalised over the other two points.
    p_ex = probs(x, x, kernel="gaussian", sigma=1.0, exclude_self=True)
    k = [math.exp(-1 / 2), math.exp(-4 / 2)]
    assert p_ex[0].tolist() == pytest.approx([0.0, k[0] / sum(k), k[1] / sum(k)])
    # Literal eq. 7: the kernel value itself is the logit.
    p_lit = probs(x, x, kernel="gaussian_literal", sigma=1.0)
    assert p_lit[0].tolist() == pytest.approx(_softmax([1.0, math.exp(-1 / 2), math.exp(-2)]))


def test_gaussian_dual_sigma() -> None:
    x = torch.randn(5, 3, dtype=torch.float64)
    gam = gam_loss(kernel="gaussian", sigma=1.0, dual_sigma=2.0)
    # Same points, dual width doubled: equivalent to dual points halved with the same width.
    _, terms = gam.compute_loss_from_embeddings(x, x, x, x, ONES)
    _, ref = gam_loss(kernel="gaussian").compute_loss_from_embeddings(
        x / 2, x / 2, x, x, ONES
    )
    for k in KEYS:
        torch.testing.assert_close(terms[k], ref[k])


@pytest.mark.parametrize("detach_cross", [True, False])
def test_gradient_routing(detach_cross: bool) -> None:
    torch.manual_seed(0)
    dual_q, dual_a, cross_q, cross_a = (torch.randn(6, 4, requires_grad=True) for _ in range(4))
    gam = gam_loss(detach_cross=detach_cross)
    assert PAPER["detach_cross"] is False  # eq. 13 optimised jointly
    total, _ = gam.compute_loss_from_embeddings(dual_q, dual_a, cross_q, cross_a, ONES)
    total.backward()
    for t in (dual_q, dual_a):
        assert t.grad is not None and torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0
    for t in (cross_q, cross_a):
        if detach_cross:
            assert t.grad is None
        else:
            assert t.grad is not None and torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0


def test_single_relation_gradients() -> None:
    """q|q touches only questions, a|a only answers."""
    torch.manual_seed(0)
    dual_q, dual_a = torch.randn(4, 3, requires_grad=True), torch.randn(4, 3, requires_grad=True)
    cross_q, cross_a = torch.randn(4, 3), torch.randn(4, 3)
    gam = gam_loss()
    total, _ = gam.compute_loss_from_embeddings(dual_q, dual_a, cross_q, cross_a, {"q|q": 1.0})
    total.backward()
    assert dual_q.grad.abs().sum() > 0
    assert dual_a.grad is None or dual_a.grad.abs().sum() == 0


def test_batch_of_one_is_finite() -> None:
    x = [torch.randn(1, 3, requires_grad=True) for _ in range(4)]
    total, terms = gam_loss().compute_loss_from_embeddings(*x, ONES)
    assert total.item() == 0.0 and all(v.item() == 0.0 for v in terms.values())
    total.backward()


def test_low_precision_is_upcast() -> None:
    x = [torch.randn(4, 3).bfloat16() for _ in range(4)]
    total, terms = gam_loss().compute_loss_from_embeddings(*x, ONES)
    assert total.dtype == torch.float32 and terms["a|q"].dtype == torch.float32
