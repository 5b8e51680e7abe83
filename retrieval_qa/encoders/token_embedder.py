"""The token embedder of the non-pretrained encoders: a word-embedding table.

The ENDX and Cross-VAE papers feed their RNN/GRU/LSTM/Transformer encoders 768-d BERT token
embeddings; offline we take the word-embedding matrix of the resolved checkpoint (384-d for
all-MiniLM-L6-v2). Tests build a small random table instead.
"""

from __future__ import annotations

import torch
from torch import nn


class TokenEmbedder(nn.Module):
    """``forward(input_ids[B, L]) -> embeddings[B, L, E]``.

    Holds one ``nn.Embedding`` (``self.embedding``); sharing a TokenEmbedder between towers
    shares that very object (ADE-STE). ``freeze()`` stops its gradient (ADE-FTE).
    ``source`` says where the weights came from (a checkpoint label or "random").

    Args:
        vocab_size: V, the number of rows.
        embedding_dim: E, the width of a row.
        padding_idx: the row of the padding id (kept at 0, no gradient); None: none.
        freeze: stop the table's gradient from the start.
        weight: a ``[V, E]`` matrix to copy into the table; None: random (N(0, 1)).
        source: where the weights came from, for reports.

    Example:

        >>> import torch
        >>> embedder = TokenEmbedder(100, 16, padding_idx=0)
        >>> embedder(torch.tensor([[5, 0]])).shape
        torch.Size([1, 2, 16])
        >>> TokenEmbedder.from_matrix(torch.zeros(10, 4), padding_idx=None, freeze=True).frozen
        True
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int,
        *,
        padding_idx: int | None,
        freeze: bool = False,
        weight: torch.Tensor | None = None,
        source: str = "random",
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=padding_idx)
        if weight is not None:
            if tuple(weight.shape) != (vocab_size, embedding_dim):
                raise ValueError(
                    f"weight has shape {tuple(weight.shape)}, expected {(vocab_size, embedding_dim)}"
                )
            with torch.no_grad():
                self.embedding.weight.copy_(weight)
        self.source = source
        if freeze:
            self.freeze()

    @classmethod
    def from_matrix(
        cls, weight: torch.Tensor, *, padding_idx: int | None, freeze: bool = False,
        source: str = "matrix",
    ) -> TokenEmbedder:
        """A table initialised from a ``[vocab, dim]`` matrix (copied, not aliased)."""
        vocab_size, dim = weight.shape
        return cls(vocab_size, dim, padding_idx=padding_idx, freeze=freeze,
                   weight=weight.detach(), source=source)

    @classmethod
    def from_pretrained(
        cls, checkpoint, freeze: bool = False, fallback: str | None = None
    ) -> TokenEmbedder:
        """The word-embedding matrix of a checkpoint (a name, a path or a ResolvedCheckpoint)."""
        weight, padding_idx, label = pretrained_word_embeddings(checkpoint, fallback)
        return cls.from_matrix(weight, padding_idx=padding_idx, freeze=freeze,
                               source=f"word embeddings of {label}")

    @property
    def vocab_size(self) -> int:
        return self.embedding.num_embeddings

    @property
    def embedding_dim(self) -> int:
        return self.embedding.embedding_dim

    @property
    def frozen(self) -> bool:
        return not self.embedding.weight.requires_grad

    def freeze(self) -> None:
        self.embedding.weight.requires_grad_(False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(input_ids)


def pretrained_word_embeddings(checkpoint, fallback: str | None = None):
    """``(weight[V, E], pad_token_id, label)`` read from a pretrained checkpoint.

    Args:
        checkpoint: a :class:`~retrieval_qa.pretrained.ResolvedCheckpoint`, or a name or
            path that :func:`~retrieval_qa.pretrained.resolve_pretrained` resolves.
        fallback: passed to :func:`~retrieval_qa.pretrained.resolve_pretrained` (``"minilm"``
            or None); unused for a resolved checkpoint.

    Returns:
        The input-embedding table (a detached copy), the model's ``pad_token_id`` (None if it
        has none) and the checkpoint's label.
    """
    from ..pretrained import ResolvedCheckpoint, load_model, resolve_pretrained

    resolved = (
        checkpoint if isinstance(checkpoint, ResolvedCheckpoint)
        else resolve_pretrained(str(checkpoint), fallback=fallback)
    )
    model = load_model(resolved)
    weight = model.get_input_embeddings().weight.detach().clone()
    pad = getattr(model.config, "pad_token_id", None)
    return weight, pad, resolved.label
