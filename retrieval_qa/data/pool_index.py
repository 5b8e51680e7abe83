"""Integer indexes of a retrieval pool that rankers and batch labels share."""

from __future__ import annotations

import torch

from .types import RetrievalPool


def doc_index(pool: RetrievalPool) -> tuple[torch.Tensor, int]:
    """[C] long: each candidate's document (paragraph) as an integer, and the number of
    documents; what doc-level ranking needs from a pool."""
    doc_names = sorted({c.doc_id for c in pool.candidates})
    doc_pos = {d: i for i, d in enumerate(doc_names)}
    return (torch.tensor([doc_pos[c.doc_id] for c in pool.candidates], dtype=torch.long),
            len(doc_names))
