"""The similarity functions of the dual encoders, decided in one place: ``dot`` (inner
product) or ``cosine`` (inner product of l2-normalised embeddings), times a scale
(1 / temperature) in the losses. Retrieval ranks by the unscaled score, so the embeddings a
model exports or evaluates are those of :func:`retrieval_space`."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

SIMILARITIES = ("dot", "cosine")


def check_similarity(similarity: str) -> str:
    """Return ``similarity`` unchanged; raise ``ValueError`` unless it is one of
    :data:`SIMILARITIES`.

    Args:
        similarity: ``"dot"`` or ``"cosine"`` (``model.loss.similarity``).
    """
    if similarity not in SIMILARITIES:
        raise ValueError(f"similarity={similarity!r}; expected one of {list(SIMILARITIES)}")
    return similarity


def retrieval_space(x: torch.Tensor, similarity: str) -> torch.Tensor:
    """Embeddings whose plain inner products are the similarity (l2-normalised for cosine).

    Args:
        x: embeddings ``[..., D]``.
        similarity: ``"dot"`` (returned as is) or ``"cosine"``.
    """
    return F.normalize(x, dim=-1) if similarity == "cosine" else x


def score_space(x: torch.Tensor, similarity: str, scale: float) -> torch.Tensor:
    """:func:`retrieval_space` times ``sqrt(scale)``: inner products are the scaled scores.

    Args:
        x: embeddings ``[..., D]``.
        similarity: ``"dot"`` or ``"cosine"``.
        scale: the loss's score scale (1 / temperature, >= 0).

    Example:

        >>> import torch
        >>> score_space(torch.tensor([[3.0, 4.0]]), "cosine", 4.0)
        tensor([[1.2000, 1.6000]])
    """
    return retrieval_space(x, similarity) * math.sqrt(scale)
