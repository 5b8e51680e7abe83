"""Mean pooling of word vectors over a text's tokens, optionally IDF-weighted:
``v(x) = sum_t w_t e_t / sum_t w_t`` over the tokens t of x found in the vocabulary
(``w_t = 1`` without IDF, ``IDF(t)`` with it), then l2-normalised (3.1: "all candidate
embedding was normalized by L2-Norm"). A text with no known token (or all weights 0) is a
zero vector, counted in the returned notes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .idf import IDF


def mean_pool(tokenized: Sequence[Sequence[str]], vocab: dict[str, int], matrix: np.ndarray,
              idf: IDF | None = None, chunk: int = 1000) -> tuple[torch.Tensor, dict]:
    """The texts' (IDF-weighted) mean word vectors, l2-normalised (see the module docstring).

    Args:
        tokenized: each text's tokens.
        vocab: token -> row of ``matrix`` (anything with ``.get``); tokens without a row
            are out of vocabulary.
        matrix: the word vectors ``[V, D]``.
        idf: the token weights; None: every token weighs 1.
        chunk: texts pooled at a time (memory ~ chunk * tokens * D).

    Returns:
        ``[N, D]`` float32 vectors and notes (``texts``, ``tokens``, ``oov_tokens``,
        ``empty_texts``).

    Example:

        >>> import numpy as np
        >>> matrix = np.array([[1.0, 0.0], [0.0, 1.0]])
        >>> vectors, notes = mean_pool([["a", "b"], ["zzz"]], {"a": 0, "b": 1}, matrix)
        >>> vectors
        tensor([[0.7071, 0.7071],
                [0.0000, 0.0000]])
        >>> notes["empty_texts"]
        1
    """
    n, dim = len(tokenized), matrix.shape[1]
    sums = torch.zeros(n, dim, dtype=torch.float64)
    wsum = torch.zeros(n, dtype=torch.float64)
    oov = total = 0
    for lo in range(0, n, chunk):   # a chunk of texts at a time: memory ~ chunk * tokens * D
        rows, weights, owner = [], [], []
        for i in range(lo, min(lo + chunk, n)):
            for t in tokenized[i]:
                total += 1
                r = vocab.get(t)
                if r is None:
                    oov += 1
                    continue
                rows.append(r)
                weights.append(idf[t] if idf is not None else 1.0)
                owner.append(i)
        if not rows:
            continue
        vecs = torch.from_numpy(np.asarray(matrix[np.asarray(rows, dtype=np.int64)],
                                           dtype=np.float64))
        w = torch.tensor(weights, dtype=torch.float64)
        own = torch.tensor(owner, dtype=torch.long)
        sums.index_add_(0, own, vecs * w[:, None])
        wsum.index_add_(0, own, w)
    empty = wsum <= 0
    pooled = torch.where(empty[:, None], torch.zeros_like(sums),
                         sums / wsum.clamp_min(1e-300)[:, None])
    pooled = torch.nn.functional.normalize(pooled, dim=1).float()
    return pooled, {"texts": n, "tokens": total, "oov_tokens": oov,
                    "empty_texts": int(empty.sum())}
