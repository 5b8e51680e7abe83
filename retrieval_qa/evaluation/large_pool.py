"""Exact search over pools too large for a block of score rows: candidates in column chunks.

The evaluator scores questions in blocks of rows sized to ``memory_mb``
(:func:`~.evaluator.rank_questions`). A row holds a score for every candidate, so with
enough candidates too few rows fit (at 512 MiB and 16 bytes a cell: 33 rows at 1,000,000
candidates, none at 34,000,000), and each block then reads every candidate embedding for a
handful of questions. Past ``min_block_rows`` (conf/search.yaml) a block
of that many rows is scored chunk by chunk of columns instead, each chunk sized to the
budget, and only what the rank rules need survives a chunk:

* the gold rank ``#(score > g) + (#(score == g) + 1) / 2`` (``g``: the best gold score of the
  row, computed first from the gold candidates' own columns): the two counts add up over the
  chunks; the gold candidates are counted from those same gold scores, so a gold candidate
  never compares with its own score computed in another product;
* document ranks: the running maximum score of each paragraph (``[rows, documents]``),
  ranked with the dense rules once every chunk has been seen;
* top-k: the best ``k`` of each chunk merged with the best so far, in one total order
  (descending score, ties by ascending candidate index: :func:`stable_top_k`), so the list
  is the same whatever the chunks, and the same as the unchunked path's.

Ranks and lists equal the unchunked path's exactly whenever the products give the same bits
for the same (question, candidate) in either shape of block, as the CPU kernels do for blocks
of two rows or more (``tests/evaluation/test_large_pool.py`` checks it on pools with ties).
"""

from __future__ import annotations

import numpy as np
import torch

from .ranking import gold_ranks


def stable_top_k(scores: torch.Tensor, k: int, offset: int = 0
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best columns of each row in one total order: descending score, ties broken
    by ascending column (``torch.topk`` leaves the order of ties open).

    Args:
        scores: ``[R, W]`` float scores.
        k: how many per row (at most ``W``).
        offset: added to the column indices (the first candidate of a chunk).

    Returns:
        ``([R, k] values, [R, k] long indices)``, best first.

    Example:

        >>> import torch
        >>> stable_top_k(torch.tensor([[0.5, 0.9, 0.5, 0.5]]), 3, offset=10)
        (tensor([[0.9000, 0.5000, 0.5000]]), tensor([[11, 10, 12]]))
    """
    k = min(k, scores.shape[1])
    if k == 0:
        return scores[:, :0], torch.zeros(scores.shape[0], 0, dtype=torch.long,
                                          device=scores.device)
    kth = scores.topk(k, dim=1).values[:, -1:]  # the k-th best score of each row
    above = scores > kth
    tied = scores == kth
    need = k - above.sum(dim=1)  # how many of the tied ones get in: the first by column
    take = above | tied
    for r in (tied.sum(dim=1) > need).nonzero().flatten().tolist():  # more ties than room
        take[r, tied[r].nonzero().flatten()[int(need[r]):]] = False
    rows, cols = take.nonzero(as_tuple=True)  # row-major: k per row, columns ascending
    values = scores[rows, cols].view(-1, k)
    return _ordered(values, (cols + offset).view(-1, k), k)


def _ordered(values: torch.Tensor, indices: torch.Tensor, k: int
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` first of each row by (descending value, ascending index)."""
    by_index = indices.argsort(dim=1, stable=True)
    values, indices = values.gather(1, by_index), indices.gather(1, by_index)
    by_value = values.argsort(dim=1, descending=True, stable=True)[:, :k]
    return values.gather(1, by_value), indices.gather(1, by_value)


def merge_top_k(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor],
                k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best of two lists ``(values, indices)`` per row, in :func:`stable_top_k`'s
    order (each candidate in at most one of them).

    Args:
        a: ``(values, indices)``, each ``[R, k_a]``.
        b: ``(values, indices)``, each ``[R, k_b]``.
        k: how many to keep per row.
    """
    return _ordered(torch.cat([a[0], b[0]], 1), torch.cat([a[1], b[1]], 1), k)


def columns_per_chunk(rows: int, memory_mb: float, bytes_per_cell: int, fixed_bytes: int = 0
                      ) -> int:
    """How many candidate columns of ``rows`` rows fit ``memory_mb`` beside ``fixed_bytes``
    (the running paragraph maxima); at least 1.

    Args:
        rows: the question rows of the block.
        memory_mb: the budget, in MiB.
        bytes_per_cell: bytes per (row, column) cell.
        fixed_bytes: bytes held whatever the chunk (the running paragraph maxima).
    """
    return max(1, (int(memory_mb * 2**20) - fixed_bytes) // (max(rows, 1) * bytes_per_cell))


def rank_block_in_chunks(scorer, rows: range, gold: list[list[int]], width: int, *, k: int,
                         doc_of: torch.Tensor | None = None, doc_gold=None, n_docs: int = 0,
                         non_finite=None) -> tuple[torch.Tensor, torch.Tensor | None, list]:
    """The gold ranks, document ranks and top-k of the questions ``rows``, from column chunks
    of ``width`` candidates (the scorer's ``score_columns(rows, columns)``).

    Args:
        scorer: a scorer with ``num_candidates`` and ``score_columns``.
        rows: the block's question rows.
        gold: ``gold[i]``: the gold candidates of row ``rows[i]``.
        width: candidates per chunk.
        k: how many best candidates per row to keep (0: none).
        doc_of: ``[C]`` long, each candidate's document; None: no document ranks.
        doc_gold: ``doc_gold[i]``: the gold documents of row ``rows[i]``.
        n_docs: the number of documents.
        non_finite: ``non_finite(row, candidate, value)`` builds the error raised for a
            non-finite score (``row``: the question's row).

    Returns:
        ``([R] float64 ranks, [R] float64 document ranks or None, top)``, ``top`` a list of
        ``(indices, scores)`` numpy arrays per row (empty when ``k`` is 0).
    """
    n_c, n_r = scorer.num_candidates, len(rows)
    pair_row = np.repeat(np.arange(n_r), [len(g) for g in gold])
    pair_col = np.concatenate([np.asarray(g, dtype=np.int64) for g in gold]) if n_r else \
        np.zeros(0, dtype=np.int64)
    union, inverse = np.unique(pair_col, return_inverse=True)
    gold_scores = scorer.score_columns(rows, torch.from_numpy(union)).float()
    _check(gold_scores, rows, lambda j: int(union[j]), non_finite)
    device = gold_scores.device
    is_gold = torch.zeros(n_r, len(union), dtype=torch.bool, device=device)
    is_gold[torch.from_numpy(pair_row).to(device), torch.from_numpy(inverse).to(device)] = True
    best = gold_scores.masked_fill(~is_gold, float("-inf")).max(dim=1, keepdim=True).values
    greater = torch.zeros(n_r, dtype=torch.float64, device=device)  # no gold is above best
    equal = ((gold_scores == best) & is_gold).sum(1, dtype=torch.float64)
    order = np.argsort(pair_col, kind="stable")
    sorted_cols, sorted_rows = pair_col[order], pair_row[order]
    doc_scores = None if doc_of is None else torch.full(
        (n_r, n_docs), float("-inf"), device=device)
    top = None
    for lo in range(0, n_c, width):
        hi = min(lo + width, n_c)
        scores = scorer.score_columns(rows, range(lo, hi)).float()
        _check(scores, rows, lambda j, lo=lo: lo + j, non_finite)
        greater += (scores > best).sum(1, dtype=torch.float64)
        equal += (scores == best).sum(1, dtype=torch.float64)
        a, b = np.searchsorted(sorted_cols, [lo, hi])
        if a < b:  # the golds were counted from their own scores: their counts here go
            r = torch.from_numpy(sorted_rows[a:b]).to(device)
            s = scores[r, torch.from_numpy(sorted_cols[a:b] - lo).to(device)]
            greater.index_add_(0, r, (s > best[r, 0]).double(), alpha=-1)
            equal.index_add_(0, r, (s == best[r, 0]).double(), alpha=-1)
        if doc_scores is not None:
            doc_scores.scatter_reduce_(1, doc_of[lo:hi].to(device).expand(n_r, -1), scores,
                                       "amax")
        if k:
            chunk_top = stable_top_k(scores, k, offset=lo)
            top = chunk_top if top is None else merge_top_k(top, chunk_top, k)
    ranks = (greater + (equal + 1.0) / 2.0).cpu()
    doc_ranks = None
    if doc_scores is not None:
        mask = torch.zeros(n_r, n_docs, dtype=torch.bool, device=device)
        for r, docs in enumerate(doc_gold):
            mask[r, docs] = True
        doc_ranks = gold_ranks(doc_scores, mask).cpu()
    listed = [] if not k else list(zip(top[1].cpu().numpy(), top[0].cpu().numpy(),
                                       strict=True))
    return ranks, doc_ranks, listed


def _check(scores: torch.Tensor, rows: range, column, non_finite) -> None:
    """A non-finite score is an error naming the question and the candidate."""
    bad = ~torch.isfinite(scores)
    if bool(bad.any()):
        r, c = (int(x) for x in bad.nonzero()[0])
        value, c = float(scores[r, c]), column(c)
        if non_finite is None:
            raise ValueError(f"non-finite score {value} for question {rows.start + r} at "
                             f"candidate {c}; ranks need finite scores: check the embeddings")
        raise non_finite(rows.start + r, c, value)
