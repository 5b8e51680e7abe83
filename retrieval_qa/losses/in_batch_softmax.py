"""In-batch sampled softmax (Henderson et al. 2017; Gillick et al. 2018), optionally weighted.

Used by the dual encoders of all three papers: ENDX eq. 1 (inner product), the SDE/ADE paper
eq. 1 (cosine with a temperature) and the supervised-mining paper eqs. 1-2 (l2-normalised
embeddings, scores x100, per-pair weights).
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import nn

from .precision import float32_region
from .similarity import check_similarity, retrieval_space, score_space


def _distributed_world() -> int:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_world_size()
    return 1


def _gather_rows(tensor: torch.Tensor, sizes: list[int]) -> list[torch.Tensor]:
    """All ranks' ``tensor`` (``sizes[r]`` rows on rank r), with gradients flowing back to
    each rank's own rows. Rows are padded to the largest size for the collective."""
    from torch.distributed.nn.functional import all_gather

    longest = max(sizes)
    if longest == 0:
        return [tensor.new_zeros((0, *tensor.shape[1:])) for _ in sizes]
    padded = tensor
    if tensor.shape[0] < longest:
        pad = tensor.new_zeros((longest - tensor.shape[0], *tensor.shape[1:]))
        padded = torch.cat([tensor, pad], dim=0)
    with warnings.catch_warnings():
        # Deprecated in favour of the functional collectives, still the autograd all_gather.
        warnings.filterwarnings("ignore", category=FutureWarning, message=".*all_gather.*")
        parts = all_gather(padded)
    return [part[:size] for part, size in zip(parts, sizes, strict=True)]


class InBatchSoftmaxLoss(nn.Module):
    """Softmax over the answers of the batch for each question, the other answers serving
    as negatives.

    ``compute_loss_from_embeddings(q[B, D], a[B', D], weights[B] | None) -> scalar``:
    ``a[:B]`` are the positives of ``q`` in order, ``a[B:]`` (B' >= B) extra hard negatives
    shared by every question. With ``s_ij = scale * sim(q_i, a_j)`` and
    ``loss_i = -log softmax_j(s_i)[i]`` the loss is ``mean_i loss_i`` or, with weights,
    ``mean_i w_i loss_i`` (supervised-mining eq. 2).

    Args:
        similarity: ``"dot"`` (ENDX's inner product) or ``"cosine"`` (SDE/ADE paper;
            supervised mining's l2-normalised dot product).
        scale: multiplies the similarities (1 / temperature): 1.0 for dot products, 20 to 100
            for cosine (supervised mining: 100).
        symmetric: also the answer-to-question direction, ``-log softmax_i(s_{:, j})[j]``
            over the B questions for each positive answer j < B (hard negatives have no
            question); the two directions are averaged per pair,
            ``(loss_q->a_i + loss_a->q_i) / 2``.
        gather_across_processes: when torch.distributed is initialised with world size > 1,
            gather q, a (and weights) from every rank with
            ``torch.distributed.nn.functional.all_gather`` (gradients flow back to each rank's
            rows), so every question sees the global batch as negatives. The gathered answers
            are ordered as all ranks' positives (rank 0's B_0, rank 1's B_1, ...) then all
            ranks' hard negatives, so question r's i-th row has its positive at
            ``sum_{s<r} B_s + i`` (``rank * B`` with equal batches). Every rank computes the
            same global-mean loss, equal to the single-process loss over the concatenated
            batches. Gradients on a rank's local embeddings are then ``world_size`` times those
            of that global loss; DDP's gradient averaging divides this back, so parameter
            gradients equal single-process training on the global batch. Local batch sizes
            may differ between ranks (rows are padded for the collective).

    ``weights`` (of ``forward``; ``[B]``, None: unweighted) are per-pair weights (supervised
    mining eq. 2: 1 for gold pairs, p^2 for mined pairs with classifier probability p; they
    are not differentiated). Eq. 2 sums ``w(x, y) * (the pair's softmax term)`` over the
    batch; here ``w_i`` multiplies the pair's loss and the batch is averaged over its B pairs
    (a constant factor, as in the unweighted loss), so all-ones weights give exactly the
    unweighted loss and the gradient of pair i is ``w_i`` times the one it has in the
    unweighted loss: a mined pair with p = 0.5 pulls a quarter as hard as a gold pair,
    whatever else the batch holds. (Dividing by ``sum_i w_i`` instead would undo the weights
    of a batch of mined pairs alone.)

    Duplicate positives: if the same answer occurs twice in a batch, each copy is a negative
    for the other's question. There is no label mask; the data module's no-duplicates
    sampler keeps an answer (and a question) at most once per batch.

    Example:

        >>> import torch
        >>> loss = InBatchSoftmaxLoss(similarity="cosine", scale=20.0, symmetric=False,
        ...                           gather_across_processes=False)
        >>> q, a = torch.randn(4, 8), torch.randn(6, 8)  # 4 pairs, 2 extra hard negatives
        >>> loss.scores(q, a).shape
        torch.Size([4, 6])
        >>> value = loss(q, a, weights=torch.tensor([1.0, 1.0, 0.25, 0.25]))
        >>> value.shape, bool(value > 0)
        (torch.Size([]), True)
    """

    def __init__(self, *, similarity: str, scale: float, symmetric: bool,
                 gather_across_processes: bool) -> None:
        super().__init__()
        check_similarity(similarity)
        if scale <= 0:
            raise ValueError(f"scale must be > 0, got {scale}")
        self.similarity = similarity
        self.scale = float(scale)
        self.symmetric = symmetric
        self.gather_across_processes = gather_across_processes

    @classmethod
    def from_config(cls, loss: dict) -> InBatchSoftmaxLoss:
        """From a method's ``loss`` block (``conf/model/dual_encoder.yaml``: the one source of
        these settings); keys other than the four arguments are the method's."""
        return cls(similarity=loss["similarity"], scale=loss["scale"],
                   symmetric=loss["symmetric"],
                   gather_across_processes=loss["gather_across_processes"])

    @property
    def temperature(self) -> float:
        return 1.0 / self.scale

    def forward(
        self, q: torch.Tensor, a: torch.Tensor, weights: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Same as :meth:`compute_loss_from_embeddings`."""
        return self.compute_loss_from_embeddings(q, a, weights)

    def score_space(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` (float32) mapped so that plain dot products are this loss's scores:
        ``score_space(q) @ score_space(a).T == scores(q, a)``, i.e. ``sqrt(scale) * x``, with
        ``x`` l2-normalised first for cosine. ENDX's GAM applies its inner-product kernel
        (eq. 10, "adapted to the scoring function") to embeddings in this space."""
        with float32_region(x) as (x,):
            return score_space(x, self.similarity, self.scale)

    def scores(self, q: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """``[B, B']`` scaled similarities (float32)."""
        with float32_region(q, a) as (q, a):
            q, a = retrieval_space(q, self.similarity), retrieval_space(a, self.similarity)
            return self.scale * (q @ a.T)

    def compute_loss_from_embeddings(
        self, q: torch.Tensor, a: torch.Tensor, weights: torch.Tensor | None = None
    ) -> torch.Tensor:
        if q.dim() != 2 or a.dim() != 2 or q.shape[1] != a.shape[1]:
            raise ValueError(f"expected q[B, D] and a[B', D], got {tuple(q.shape)}, {tuple(a.shape)}")
        if a.shape[0] < q.shape[0]:
            raise ValueError(
                f"need at least one answer per question: {q.shape[0]} questions, "
                f"{a.shape[0]} answers"
            )
        if weights is not None and tuple(weights.shape) != (q.shape[0],):
            raise ValueError(f"weights must have shape [{q.shape[0]}], got {tuple(weights.shape)}")
        if self.gather_across_processes and _distributed_world() > 1:
            q, a, weights = self._gather(q, a, weights)

        batch = q.shape[0]
        scores = self.scores(q, a)
        with float32_region(scores):
            labels = torch.arange(batch, device=scores.device)
            per_pair = F.cross_entropy(scores, labels, reduction="none")
            if self.symmetric:
                backward = F.cross_entropy(scores[:, :batch].T, labels, reduction="none")
                per_pair = 0.5 * (per_pair + backward)
            if weights is None:
                return per_pair.mean()
            w = weights.detach().to(per_pair.dtype)
            return (w * per_pair).mean()

    @staticmethod
    def _gather(q: torch.Tensor, a: torch.Tensor, weights: torch.Tensor | None):
        """Global q, a (positives first, then hard negatives) and weights."""
        dist = torch.distributed
        batch = q.shape[0]
        local = torch.tensor([batch, a.shape[0] - batch], device=q.device)
        all_sizes = [torch.zeros_like(local) for _ in range(dist.get_world_size())]
        dist.all_gather(all_sizes, local)
        positives = [int(s[0]) for s in all_sizes]
        negatives = [int(s[1]) for s in all_sizes]
        q_all = torch.cat(_gather_rows(q, positives), dim=0)
        a_all = torch.cat(
            _gather_rows(a[:batch], positives) + _gather_rows(a[batch:], negatives), dim=0
        )
        w_all = None
        if weights is not None:
            w_all = torch.cat(_gather_rows(weights.detach().unsqueeze(1), positives)).squeeze(1)
        return q_all, a_all, w_all
