"""Scorers: objects that give the [questions, candidates] score block for a range of questions.

The evaluator only ever asks for a block of rows, sized so the block fits a memory budget,
so the full question-by-candidate matrix is never materialised.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Protocol

import torch


class Scorer(Protocol):
    """What the evaluator ranks with: ``num_questions``, ``num_candidates`` and
    ``score(rows)`` (optionally ``score_sparse(rows)``, :mod:`.sparse`). :class:`DenseScorer`
    is one; the BM25 baseline and the pipeline's fused lists are others.

    Example:

        >>> import torch
        >>> isinstance(DenseScorer(torch.ones(2, 3), torch.ones(4, 3)).score(range(0, 2)),
        ...            torch.Tensor)
        True
    """

    num_questions: int
    num_candidates: int

    def score(self, rows: range) -> torch.Tensor:
        """Scores [len(rows), num_candidates] (float32) for questions ``rows``."""
        ...


class DenseScorer:
    """Exact inner-product search over precomputed embeddings (the reference uses plain dot
    products; normalise the embeddings first for cosine).

    ``device``: where the scores are computed (default: where the embeddings are), e.g. the
    GPU that encoded them; the blocks of scores stay there for ranking. Always in full float32
    (no TF32 on a GPU), so near-ties are ordered as on the CPU; the process-wide matmul
    precision is the same after each call as before (:func:`full_float32_matmul`).

    Args:
        questions: ``[Q, D]`` question embeddings (in the retrieval space).
        candidates: ``[C, D]`` candidate embeddings.
        device: where the scores are computed; None: the questions' device.

    Example:

        >>> import torch
        >>> scorer = DenseScorer(torch.randn(5, 8), torch.randn(20, 8))
        >>> scorer.num_questions, scorer.num_candidates, scorer.score(range(1, 3)).shape
        (5, 20, torch.Size([2, 20]))
    """

    def __init__(self, questions: torch.Tensor, candidates: torch.Tensor,
                 device: torch.device | str | None = None) -> None:
        if questions.dim() != 2 or candidates.dim() != 2 or questions.shape[1] != candidates.shape[1]:
            raise ValueError(f"embeddings must be [Q, D] and [C, D], got {tuple(questions.shape)} "
                             f"and {tuple(candidates.shape)}")
        self.questions = questions.float().to(device or questions.device)
        self.candidates = candidates.float().to(self.questions.device)
        self.num_questions = len(questions)
        self.num_candidates = len(candidates)

    def score(self, rows: range) -> torch.Tensor:
        """Scores ``[len(rows), num_candidates]`` (float32) of questions ``rows``, in full
        float32 whatever the process-wide matmul precision (:func:`full_float32_matmul`).

        Args:
            rows: a range of question rows.
        """
        with full_float32_matmul():
            return self.questions[rows.start:rows.stop] @ self.candidates.T

    def score_columns(self, rows: range, columns: range | torch.Tensor) -> torch.Tensor:
        """Scores ``[len(rows), len(columns)]`` (float32) of questions ``rows`` against the
        candidates ``columns`` (a range, or a [n] long tensor of indices): the blocks a pool
        too large for one row of scores is ranked in (:mod:`.large_pool`).

        Args:
            rows: a range of question rows.
            columns: a range of candidates, or their indices.
        """
        cands = self.candidates[columns.start:columns.stop] if isinstance(columns, range) \
            else self.candidates[columns.to(self.candidates.device)]
        with full_float32_matmul():
            return self.questions[rows.start:rows.stop] @ cands.T


#: held while a scorer's product runs: one thread's switch of the process-wide matmul
#: precision and its restore never interleave with another scorer's product
_MATMUL_PRECISION = threading.RLock()


@contextlib.contextmanager
def full_float32_matmul() -> Iterator[None]:
    """Matrix products in full float32 (``torch.get_float32_matmul_precision() ==
    "highest"``, the default: no TF32 or bfloat16 inside), and the process-wide setting as
    it was afterwards, on an error too.

    PyTorch has no per-call precision, so under another setting (a training run may have set
    ``"high"`` for TF32) the setting is switched for the block and restored in a ``finally``;
    at the default (every ``rqa evaluate``) nothing is switched. A lock serialises the blocks
    of every thread, so one thread's restore never lands inside another's product (a scorer
    that read "highest" while another had switched it would otherwise compute under the
    restored setting). What the lock cannot hold: a float32 matmul of unrelated code in
    another thread during the switch runs in full float32 too (more precise, never less).

    Example:

        >>> import torch
        >>> with full_float32_matmul():
        ...     torch.get_float32_matmul_precision()
        'highest'
    """
    with _MATMUL_PRECISION:
        precision = torch.get_float32_matmul_precision()
        if precision == "highest":
            yield
            return
        torch.set_float32_matmul_precision("highest")
        try:
            yield
        finally:
            torch.set_float32_matmul_precision(precision)


def rows_per_block(num_candidates: int, memory_mb: float, bytes_per_cell: int = 16) -> int:
    """How many question rows fit the budget: a float32 score, a float32 copy and a few bool
    masks per cell (``bytes_per_cell``) for every candidate; at least 1 (past that, the
    candidates go in column chunks: :mod:`.large_pool`).

    Args:
        num_candidates: the candidates (columns) of each row.
        memory_mb: the budget, in MiB.
        bytes_per_cell: bytes per (row, candidate) cell.
    """
    return max(1, fitting_rows(num_candidates, memory_mb, bytes_per_cell))


def fitting_rows(num_candidates: int, memory_mb: float, bytes_per_cell: int = 16) -> int:
    """How many question rows of every candidate fit ``memory_mb`` (0: not even one).

    Args:
        num_candidates: the candidates (columns) of each row.
        memory_mb: the budget, in MiB.
        bytes_per_cell: bytes per (row, candidate) cell.
    """
    return int(memory_mb * 2**20) // (max(num_candidates, 1) * bytes_per_cell)
