"""The interface every token encoder keeps (pretrained, recurrent, transformer)."""

from __future__ import annotations

import torch
from torch import nn


class TokenEncoder(nn.Module):
    """``forward(input_ids[B, L], attention_mask[B, L], token_type_ids[B, L] | None = None,
    input_offset[E] | None = None) -> states[B, L, H]`` with ``H == self.hidden_size``.

    ``input_offset``, when given, is added to every token's embedding (width
    ``self.input_dim``) before the layers above it: the input-type vector of a
    :class:`~.tower.Tower` with ``input_types``.

    ``attention_mask`` is 1 for tokens and 0 for padding; padding must be on the right (as
    Hugging Face tokenizers pad by default). Subclasses also expose their token embedder, the
    lowest layer that maps ids to vectors, so that :class:`~.dual_towers.DualTowers` can share
    it (ADE-STE) or freeze it (ADE-FTE).

    An interface: no constructor arguments of its own (see :class:`RecurrentTokenEncoder`,
    :class:`TransformerTokenEncoder`, :class:`PretrainedTokenEncoder`).

    Example:

        >>> from retrieval_qa.encoders import RecurrentTokenEncoder, TokenEmbedder
        >>> encoder = RecurrentTokenEncoder(TokenEmbedder(100, 16, padding_idx=0), kind="gru",
        ...                                 hidden_size=8, num_layers=1, bidirectional=False,
        ...                                 dropout=0.0)
        >>> isinstance(encoder, TokenEncoder), encoder.input_dim
        (True, 16)
        >>> encoder.freeze_token_embedder()
        >>> encoder.token_embedder.frozen
        True
    """

    hidden_size: int

    @property
    def token_embedder(self) -> nn.Module:
        raise NotImplementedError

    @property
    def input_dim(self) -> int:
        """The width of the token embeddings (what ``input_offset`` is added to)."""
        raise NotImplementedError

    def set_token_embedder(self, module: nn.Module) -> None:
        """Use ``module`` (typically another encoder's token embedder) as the token embedder."""
        raise NotImplementedError

    def freeze_token_embedder(self) -> None:
        """Stop gradients into the token embedding tables (``requires_grad = False``)."""
        for module in self.token_embedder.modules():
            if isinstance(module, nn.Embedding):
                module.weight.requires_grad_(False)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        input_offset: torch.Tensor | None = None,
    ) -> torch.Tensor:
        raise NotImplementedError


class EmbedderTokenEncoder(TokenEncoder):
    """A token encoder built on its own ``self.embedder`` (recurrent, transformer)."""

    embedder: nn.Module

    @property
    def token_embedder(self) -> nn.Module:
        return self.embedder

    @property
    def input_dim(self) -> int:
        return int(self.embedder.embedding_dim)

    def embed(self, input_ids: torch.Tensor, input_offset: torch.Tensor | None) -> torch.Tensor:
        """The token embeddings ``[B, L, E]``, plus ``input_offset`` when given."""
        embedded = self.embedder(input_ids)
        return embedded if input_offset is None else embedded + input_offset

    def set_token_embedder(self, module: nn.Module) -> None:
        self.embedder = module
