"""Gradient caching (GradCache, Gao et al. 2021; the procedure of sentence-transformers'
CachedMultipleNegativesRankingLoss) for in-batch-negative losses: the batch's in-batch
negatives no longer cost the memory of the whole batch's activations.

1. embed every mini-batch of questions and answers without a graph (recording the RNG state
   before each, so dropout draws the same masks again in step 3);
2. the loss on the concatenated embeddings, and its gradient with respect to them only;
3. embed each mini-batch again with a graph and backpropagate ``<embedding, its gradient>``
   (plus its share of the pooler penalty), one mini-batch at a time.

The parameter gradients equal those of the plain loss on the whole batch (tested); the peak
memory is one mini-batch's activations plus the [B, D] embeddings. Step 3's backward goes
through ``backward`` (``LightningModule.manual_backward``: loss scaling under 16-bit mixed
precision, DDP gradient sync).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch


class _RngState:
    """The CPU (and, when in use, CUDA) generator states at one point, to replay."""

    def __init__(self) -> None:
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)


def split_batch(batch: Mapping[str, torch.Tensor], size: int) -> list[dict[str, torch.Tensor]]:
    """A token batch cut into mini-batches of at most ``size`` rows, each cut to its own
    longest sequence (the trailing padding columns of the whole batch dropped: a mini-batch
    of short texts is not encoded at the batch's width).

    Args:
        batch: a token batch, ``{"input_ids": [B, L], "attention_mask": [B, L], ...}``; its
            2-d tensors are cut in width, the others only in rows.
        size: the most rows of one mini-batch (>= 1).

    Example:

        >>> import torch
        >>> batch = {"input_ids": torch.tensor([[5, 6, 0], [7, 0, 0], [8, 9, 4]]),
        ...          "attention_mask": torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1]])}
        >>> [tuple(part["input_ids"].shape) for part in split_batch(batch, 2)]
        [(2, 2), (1, 3)]
    """
    rows = batch["input_ids"].shape[0]
    out = []
    for lo in range(0, rows, size):
        part = {k: v[lo:lo + size] for k, v in batch.items()}
        width = int(part["attention_mask"].sum(dim=1).max()) if rows else 0
        out.append({k: v[:, :max(width, 1)] if v.dim() == 2 else v for k, v in part.items()})
    return out


Encode = Callable[..., tuple[torch.Tensor, torch.Tensor]]  # tower.encode: (emb, penalty)


def grad_cache_step(encode_question: Encode, encode_answer: Encode,
                    q_batch: Mapping[str, torch.Tensor], a_batch: Mapping[str, torch.Tensor],
                    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                    mini_batch_size: int, backward: Callable[[torch.Tensor], None],
                    penalty_coef: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Accumulate into the parameters' ``.grad`` the gradient of
    ``loss_fn(Q, A) + penalty_coef * (P_q + P_a)`` (``P``: the batch-mean pooler penalty of
    each side) and return ``(retrieval loss, penalty)``, both detached.

    Args:
        encode_question: the question tower's encoding, ``encode(**token_batch) ->
            (embeddings [n, D], pooler penalty)``.
        encode_answer: the answer tower's, the same way.
        q_batch: the questions' token batch (``input_ids``, ``attention_mask``, ...).
        a_batch: the answers' token batch, row ``i`` matching question ``i``.
        loss_fn: the retrieval loss of the whole batch's embeddings, ``(Q [B, D], A [B, D])
            -> scalar``.
        mini_batch_size: the most rows encoded at a time (>= 1;
            ``gradient_cache.mini_batch_size``).
        backward: runs the backward pass of a surrogate scalar
            (``LightningModule.manual_backward``).
        penalty_coef: the weight of the pooler penalty (0: its gradient is not taken).
    """
    if mini_batch_size < 1:
        raise ValueError(f"gradient_cache.mini_batch_size must be >= 1, got {mini_batch_size}")
    sides = [(encode_question, split_batch(q_batch, mini_batch_size)),
             (encode_answer, split_batch(a_batch, mini_batch_size))]
    embedded, states, penalty = [], [], torch.zeros(())
    with torch.no_grad():
        for encode, chunks in sides:
            rows = sum(c["input_ids"].shape[0] for c in chunks)
            parts, side_states = [], []
            for chunk in chunks:
                side_states.append(_RngState())
                emb, pen = encode(**chunk)
                parts.append(emb)
                penalty = penalty + pen.float().cpu() * chunk["input_ids"].shape[0] / rows
            embedded.append(torch.cat(parts))
            states.append(side_states)
    after = _RngState()
    q, a = (e.detach().requires_grad_() for e in embedded)
    loss = loss_fn(q, a)
    grad_q, grad_a = torch.autograd.grad(loss, [q, a])
    for (encode, chunks), grads, side_states in zip(sides, (grad_q, grad_a), states,
                                                    strict=True):
        rows = grads.shape[0]
        lo = 0
        for chunk, state in zip(chunks, side_states, strict=True):
            state.restore()
            emb, pen = encode(**chunk)
            n = emb.shape[0]
            surrogate = (emb * grads[lo:lo + n].to(emb.dtype)).sum()
            if penalty_coef:
                surrogate = surrogate + penalty_coef * pen * (n / rows)
            backward(surrogate)
            lo += n
    after.restore()
    return loss.detach(), penalty.detach()
