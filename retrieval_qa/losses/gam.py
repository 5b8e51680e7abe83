"""Geometry Alignment Mechanism (GAM) of ENDX (paper section 3.4, eqs. 6-12).

GAM aligns the in-batch *neighbour geometry* of the dual-embeddings with that of the
cross-embeddings. For anchors ``x_i`` and candidate neighbours ``y_j`` of one batch, the
conditional neighbour distribution is (eqs. 6-8)::

    p(y_j | x_i) = exp(s(x_i, y_j)) / sum_k exp(s(x_i, y_k))

with the logit ``s`` given by the kernel:

* ``"inner_product"`` (eq. 10, the paper's choice): ``s = x_i . y_j``, the dual-encoder scoring
  function, so ``p(a_j | q_i)`` is exactly the in-batch retrieval softmax of eqs. 1 and 5.
* ``"gaussian"`` (eq. 9, SNE reading): ``s = -||x_i - y_j||^2 / (2 sigma^2)``, i.e. the
  neighbour probability is proportional to the Gaussian kernel
  ``exp(-||x_i - y_j||^2 / (2 sigma^2))``, as in SNE (Hinton & Roweis 2002) and in the KDE
  view the paper invokes (eq. 9's width argument is ``2 sigma^2`` in eqs. 7-8).
* ``"gaussian_literal"``: eq. 7 applied verbatim with the kernel of eq. 9, i.e.
  ``s = exp(-||x_i - y_j||^2 / (2 sigma^2))`` inside another exp. Logits then lie in (0, 1],
  which makes every distribution nearly uniform; offered only for completeness.

The four relations (``"x|y"`` = p(x_j | y_i): anchor from ``y``, neighbours from ``x``):

=======  ===========  =============  ==========
key      anchor  i    neighbours  j  self pair
=======  ===========  =============  ==========
``q|q``  question     questions      excluded by default
``a|a``  answer       answers        excluded by default
``a|q``  question     answers        kept (a_i is q_i's match)
``q|a``  answer       questions      kept
=======  ===========  =============  ==========

``exclude_self`` (conf/model/endx.yaml: false): whether a point is its own neighbour in ``q|q`` and
``a|a``. The paper's sums run over all ``k = 1..B`` (eqs. 7, 8, 11), so by default the self
pair ``p(q_i | q_i)`` is kept, as written. (A reading, not a measurement: once the embeddings
spread out, the inner-product kernel's self score ``||q_i||^2`` dominates each row, which keeps
these two KLs small and would fit section 4.4's weight of 1e4 for them against 0.5 for
``a|q``/``q|a``. At initialisation, when every row is nearly uniform, both conventions give
the same values: 0.014 / 0.002 for q|q / a|a on the first ReQA SQuAD batch of the endx_gru CPU
profile, ``experiments/endx_loss_trace.py --steps 1``.) ``exclude_self=True`` is SNE's
convention: ``p(q_i | q_i) = 0`` and each row is renormalised over the other ``B - 1`` points.
For ``a|q``/``q|a`` the diagonal is the matched pair and always kept.

KL term (eq. 11), from the cross-side (target) to the dual-side distribution::

    L_{x|y} = 1/B * sum_i sum_j p_cross(x_j | y_i) * log(p_cross(x_j | y_i) / p_dual(x_j | y_i))

i.e. the per-anchor KL summed over neighbours and *averaged over the B anchors* (PyTorch's
``reduction="batchmean"``), which is exactly the 1/B double sum of eq. 11. Excluded self
pairs contribute 0 (``0 log 0 = 0``).

Total (eq. 12): ``L_ga = sum_r alpha_r L_r`` over the four relations; the ramped weights of
section 4.4 come from :class:`retrieval_qa.models.endx_schedule.GamWeightSchedule`.

``detach_cross`` (conf/model/endx.yaml: false): eq. 13 is one objective optimised jointly, so GAM
back-propagates into the Cross-Encoders too (the paper's reading). ``detach_cross=True``
detaches the cross-embeddings, so GAM acts as distillation with the cross side as teacher:
the cross side is then trained by its own loss (eq. 5) alone, and the large ``q|q``/``a|a``
weights (up to 1e4) cannot pull it towards the student's geometry. The CPU and GPU profiles
of the ENDX experiments set it (the setting of every ENDX result so far, and a labelled
departure in their descriptions).

Low-precision inputs (fp16/bf16) are upcast to float32 for the softmax/KL; float64 stays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import nn
from torch.nn import functional as F

from .precision import float32_region
from .relations import RELATION_NAMES

__all__ = [
    "KERNELS",
    "RELATIONS",
    "RELATION_NAMES",
    "GeometryAlignmentLoss",
    "kernel_logits",
    "kl_divergence_rows",
    "log_neighbour_probabilities",
    "neighbour_probabilities",
    "relation_kl",
]

KERNELS = ("inner_product", "gaussian", "gaussian_literal")
#: ``"x|y"`` -> (neighbour side, anchor side), in the order of :data:`RELATION_NAMES`.
RELATIONS: dict[str, tuple[str, str]] = {
    name: (name[0], name[2]) for name in RELATION_NAMES.values()
}
_SELF_RELATIONS = tuple(name for name, (x, y) in RELATIONS.items() if x == y)


def _upcast(x: torch.Tensor) -> torch.Tensor:
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def kernel_logits(x: torch.Tensor, y: torch.Tensor, *, kernel: str, sigma: float
                  ) -> torch.Tensor:
    """Unnormalised log-neighbour scores ``s(x_i, y_j)``, ``[B_x, B_y]`` (see module docstring).

    Args:
        x: the anchors, ``[B_x, D]``.
        y: the neighbours, ``[B_y, D]``.
        kernel: ``"inner_product"``, ``"gaussian"`` or ``"gaussian_literal"``.
        sigma: the Gaussian width (> 0); unused by ``"inner_product"``.
    """
    if x.dim() != 2 or y.dim() != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y must be [B, D] with equal D, got {tuple(x.shape)}, {tuple(y.shape)}")
    x, y = _upcast(x), _upcast(y)
    if kernel == "inner_product":
        return x @ y.T
    if kernel in ("gaussian", "gaussian_literal"):
        if sigma <= 0:
            raise ValueError(f"sigma must be positive, got {sigma}")
        # Explicit difference (not the ||x||^2 - 2xy + ||y||^2 expansion): exact, and
        # the diagonal of a self relation is exactly 0.
        sq_dist = (x.unsqueeze(1) - y.unsqueeze(0)).pow(2).sum(-1)
        log_k = -sq_dist / (2.0 * sigma**2)
        return log_k if kernel == "gaussian" else torch.exp(log_k)
    raise ValueError(f"unknown kernel {kernel!r}; expected one of {KERNELS}")


def _self_mask(logits: torch.Tensor) -> torch.Tensor:
    if logits.shape[0] != logits.shape[1]:
        raise ValueError(
            f"exclude_self needs anchors and neighbours from the same set (square matrix), "
            f"got {tuple(logits.shape)}"
        )
    if logits.shape[0] < 2:
        raise ValueError("exclude_self needs a batch of at least 2 (no neighbour left otherwise)")
    return torch.eye(logits.shape[0], dtype=torch.bool, device=logits.device)


def log_neighbour_probabilities(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    kernel: str,
    sigma: float,
    exclude_self: bool,
) -> torch.Tensor:
    """``log p(y_j | x_i)``, ``[B_x, B_y]``: row ``i`` is anchor ``x_i``'s distribution over ``y``.

    With ``exclude_self`` (``x`` and ``y`` the same set, same order) the diagonal is ``-inf``
    (``p(y_i | x_i) = 0``) and each row is normalised over the other ``B - 1`` points.

    Args:
        x: the anchors, ``[B_x, D]``.
        y: the neighbours, ``[B_y, D]``.
        kernel: see :func:`kernel_logits`.
        sigma: the Gaussian width; unused by ``"inner_product"``.
        exclude_self: give each anchor's own point probability 0 (needs ``B_x == B_y >= 2``).
    """
    logits = kernel_logits(x, y, kernel=kernel, sigma=sigma)
    if exclude_self:
        logits = logits.masked_fill(_self_mask(logits), float("-inf"))
    return F.log_softmax(logits, dim=-1)


def neighbour_probabilities(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    kernel: str,
    sigma: float,
    exclude_self: bool,
) -> torch.Tensor:
    """``P[i, j] = p(y_j | x_i)`` (eq. 6 with the kernel of eq. 9 or 10); rows sum to 1.

    Args:
        x: the anchors, ``[B_x, D]``.
        y: the neighbours, ``[B_y, D]``.
        kernel: see :func:`kernel_logits`.
        sigma: the Gaussian width; unused by ``"inner_product"``.
        exclude_self: see :func:`log_neighbour_probabilities`.

    Example:

        >>> import torch
        >>> x = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> p = neighbour_probabilities(x, x, kernel="inner_product", sigma=1.0,
        ...                             exclude_self=True)
        >>> p.tolist()
        [[0.0, 1.0], [1.0, 0.0]]
    """
    return log_neighbour_probabilities(x, y, kernel=kernel, sigma=sigma,
                                       exclude_self=exclude_self).exp()


def kl_divergence_rows(
    log_p: torch.Tensor, log_q: torch.Tensor, ignore: torch.Tensor | None = None
) -> torch.Tensor:
    """Per-row ``KL(P || Q) = sum_j P log(P / Q)`` from log-probabilities, ``[B]``.

    Args:
        log_p: ``log P``, ``[B, N]`` (the target distribution, one row per anchor).
        log_q: ``log Q``, ``[B, N]``.
        ignore: bool ``[B, N]`` marking entries with ``P = Q = 0`` (excluded pairs); they
            contribute exactly 0 and produce no NaN in forward or backward. None: none.
    """
    if ignore is not None:
        log_p = log_p.masked_fill(ignore, 0.0)
        log_q = log_q.masked_fill(ignore, 0.0)
        p = log_p.exp().masked_fill(ignore, 0.0)
    else:
        p = log_p.exp()
    return (p * (log_p - log_q)).sum(dim=-1)


def relation_kl(
    cross_x: torch.Tensor,
    cross_y: torch.Tensor,
    dual_x: torch.Tensor,
    dual_y: torch.Tensor,
    *,
    kernel: str,
    sigma: float,
    exclude_self: bool,
    dual_sigma: float | None = None,
) -> torch.Tensor:
    """Eq. 11 for one relation: ``1/B sum_i KL(p_cross(. | x_i) || p_dual(. | x_i))``.

    ``cross_x``/``dual_x`` are the anchors, ``cross_y``/``dual_y`` the neighbours. ``sigma``
    is the cross-side width (``sigma_c`` of eq. 7) and ``dual_sigma`` the dual-side width
    (``sigma_d`` of eq. 8, default: same as ``sigma``); both only matter for Gaussian kernels.

    Args:
        cross_x: ``[B, D_c]`` cross-side anchors.
        cross_y: ``[B', D_c]`` cross-side neighbours.
        dual_x: ``[B, D_d]`` dual-side anchors (row ``i`` matches ``cross_x``'s).
        dual_y: ``[B', D_d]`` dual-side neighbours.
        kernel: ``"inner_product"``, ``"gaussian"`` or ``"gaussian_literal"``.
        sigma: cross-side Gaussian width.
        exclude_self: leave ``p(x_i | x_i)`` out (anchors and neighbours one set, ``B == B'``).
        dual_sigma: dual-side Gaussian width; None: ``sigma``.

    Returns:
        The scalar mean KL over the anchors.

    Example:

        >>> import torch
        >>> x, y = torch.randn(3, 4), torch.randn(5, 4)
        >>> kl = relation_kl(x, y, x, y, kernel="gaussian", sigma=1.0, exclude_self=False)
        >>> round(float(kl), 2)
        0.0
    """
    if cross_x.shape[0] != dual_x.shape[0] or cross_y.shape[0] != dual_y.shape[0]:
        raise ValueError("cross and dual embeddings must cover the same batch")
    dual_sigma = sigma if dual_sigma is None else dual_sigma
    log_p_cross = log_neighbour_probabilities(cross_x, cross_y, kernel=kernel, sigma=sigma,
                                              exclude_self=exclude_self)
    log_p_dual = log_neighbour_probabilities(dual_x, dual_y, kernel=kernel, sigma=dual_sigma,
                                             exclude_self=exclude_self)
    ignore = _self_mask(log_p_cross) if exclude_self else None
    return kl_divergence_rows(log_p_cross, log_p_dual, ignore).mean()


class GeometryAlignmentLoss(nn.Module):
    """GAM loss, eqs. 6-12. No parameters; the math is in the module-level functions.

    Args:
        kernel: ``"inner_product"`` (the paper's, eq. 10), ``"gaussian"`` (eq. 9, SNE
            reading) or ``"gaussian_literal"`` (see module docstring).
        sigma: Gaussian width for the cross side (and the dual side unless ``dual_sigma``).
        exclude_self: drop ``p(q_i | q_i)`` / ``p(a_i | a_i)`` from ``q|q`` and ``a|a`` (SNE);
            False: the paper's sums over all ``k`` (see the module docstring).
        detach_cross: stop GAM gradients into the cross-embeddings (teacher).
        dual_sigma: optional separate Gaussian width for the dual side (eqs. 7-8 name
            ``sigma_c`` and ``sigma_d`` separately); None: ``sigma``.

    ``forward(dual_q, dual_a, cross_q, cross_a, weights)``: four ``[B, D]`` embeddings (row
    ``i`` of each belongs to QA pair ``i``; the dual pair and the cross pair may differ in
    ``D``) and ``{relation: weight}``; returns ``(weighted total, {relation: unweighted KL})``
    (:meth:`compute_loss_from_embeddings`).

    Example:

        >>> import torch
        >>> gam = GeometryAlignmentLoss(kernel="inner_product", sigma=1.0, exclude_self=False,
        ...                             detach_cross=True)
        >>> q, a = torch.randn(4, 8), torch.randn(4, 8)
        >>> total, terms = gam(q, a, q.clone(), a.clone(), {"a|q": 1.0, "q|a": 1.0})
        >>> sorted(terms), total.shape
        (['a|a', 'a|q', 'q|a', 'q|q'], torch.Size([]))
        >>> round(float(terms["a|q"]), 2)  # identical geometries: nothing to align
        0.0
    """

    def __init__(
        self,
        *,
        kernel: str,
        sigma: float,
        exclude_self: bool,
        detach_cross: bool,
        dual_sigma: float | None = None,
    ) -> None:
        super().__init__()
        if kernel not in KERNELS:
            raise ValueError(f"unknown kernel {kernel!r}; expected one of {KERNELS}")
        for name, s in (("sigma", sigma), ("dual_sigma", dual_sigma)):
            if s is not None and not (s > 0 and math.isfinite(s)):
                raise ValueError(f"{name} must be a positive finite number, got {s}")
        self.kernel = kernel
        self.sigma = float(sigma)
        self.dual_sigma = None if dual_sigma is None else float(dual_sigma)
        self.exclude_self = exclude_self
        self.detach_cross = detach_cross

    def extra_repr(self) -> str:
        return (
            f"kernel={self.kernel!r}, sigma={self.sigma}, dual_sigma={self.dual_sigma}, "
            f"exclude_self={self.exclude_self}, detach_cross={self.detach_cross}"
        )

    def relation_terms(
        self,
        dual_q: torch.Tensor,
        dual_a: torch.Tensor,
        cross_q: torch.Tensor,
        cross_a: torch.Tensor,
        relations: tuple[str, ...] = tuple(RELATIONS),
    ) -> dict[str, torch.Tensor]:
        """Unweighted KL terms ``{"q|q", "a|a", "a|q", "q|a"} -> scalar`` (eq. 11 each).

        All inputs ``[B, D]``, row ``i`` of every tensor belongs to QA pair ``i``. With
        ``exclude_self`` and ``B < 2`` the ``q|q``/``a|a`` terms are 0 (no neighbours).
        """
        batch = dual_q.shape[0]
        for name, t in (("dual_a", dual_a), ("cross_q", cross_q), ("cross_a", cross_a)):
            if t.shape[0] != batch:
                raise ValueError(f"{name} has {t.shape[0]} rows, dual_q has {batch}")
        if dual_q.shape[1] != dual_a.shape[1] or cross_q.shape[1] != cross_a.shape[1]:
            raise ValueError("question and answer embeddings of one side must have equal width")
        if self.detach_cross:
            cross_q, cross_a = cross_q.detach(), cross_a.detach()
        dual = {"q": dual_q, "a": dual_a}
        cross = {"q": cross_q, "a": cross_a}
        terms: dict[str, torch.Tensor] = {}
        for key in relations:
            if key not in RELATIONS:
                raise KeyError(f"unknown GAM relation {key!r}; expected {tuple(RELATIONS)}")
            neighbour, anchor = RELATIONS[key]
            exclude = self.exclude_self and key in _SELF_RELATIONS
            if exclude and batch < 2:
                # Keep the graph (and dtype/device) so callers can always backprop the total.
                terms[key] = 0.0 * (_upcast(dual[anchor]).sum() + _upcast(cross[anchor]).sum())
                continue
            terms[key] = relation_kl(
                cross[anchor], cross[neighbour], dual[anchor], dual[neighbour],
                kernel=self.kernel, sigma=self.sigma, exclude_self=exclude,
                dual_sigma=self.dual_sigma,
            )
        return terms

    def compute_loss_from_embeddings(
        self,
        dual_q: torch.Tensor,
        dual_a: torch.Tensor,
        cross_q: torch.Tensor,
        cross_a: torch.Tensor,
        weights: Mapping[str, float],
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Eq. 12: ``(sum_r weights[r] * L_r, {r: L_r})`` for ``r`` in ``q|q, a|a, a|q, q|a``.

        All four terms are always computed (they are ``B x B`` and cheap) and returned,
        unweighted and with their graph (``.detach()`` them for logging). ``weights`` may omit
        relations (weight 0); unknown keys raise ``KeyError``.
        """
        unknown = set(weights) - set(RELATIONS)
        if unknown:
            raise KeyError(f"unknown GAM weight keys {sorted(unknown)}; expected {tuple(RELATIONS)}")
        with float32_region(dual_q, dual_a, cross_q, cross_a) as (dual_q, dual_a, cross_q, cross_a):
            terms = self.relation_terms(dual_q, dual_a, cross_q, cross_a)
            total = sum(float(weights.get(key, 0.0)) * value for key, value in terms.items())
        return total, terms

    def forward(
        self,
        dual_q: torch.Tensor,
        dual_a: torch.Tensor,
        cross_q: torch.Tensor,
        cross_a: torch.Tensor,
        weights: Mapping[str, float],
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Alias of :meth:`compute_loss_from_embeddings`."""
        return self.compute_loss_from_embeddings(dual_q, dual_a, cross_q, cross_a, weights)
