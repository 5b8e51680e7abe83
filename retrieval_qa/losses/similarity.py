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
    if similarity not in SIMILARITIES:
        raise ValueError(f"similarity={similarity!r}; expected one of {list(SIMILARITIES)}")
    return similarity


def retrieval_space(x: torch.Tensor, similarity: str) -> torch.Tensor:
    """Embeddings whose plain inner products are the similarity (l2-normalised for cosine)."""
    return F.normalize(x, dim=-1) if similarity == "cosine" else x


def score_space(x: torch.Tensor, similarity: str, scale: float) -> torch.Tensor:
    """:func:`retrieval_space` times ``sqrt(scale)``: inner products are the scaled scores."""
    return retrieval_space(x, similarity) * math.sqrt(scale)
