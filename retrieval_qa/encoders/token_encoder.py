"""The interface every token encoder keeps (pretrained, recurrent, transformer)."""

from __future__ import annotations

import torch
from torch import nn


class TokenEncoder(nn.Module):
    """``forward(input_ids[B, L], attention_mask[B, L], token_type_ids[B, L] | None = None)
    -> states[B, L, H]`` with ``H == self.hidden_size``.

    ``attention_mask`` is 1 for tokens and 0 for padding; padding must be on the right (as
    Hugging Face tokenizers pad by default). Subclasses also expose their token embedder, the
    lowest layer that maps ids to vectors, so that :class:`~.dual_towers.DualTowers` can share
    it (ADE-STE) or freeze it (ADE-FTE).
    """

    hidden_size: int

    @property
    def token_embedder(self) -> nn.Module:
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
    ) -> torch.Tensor:
        raise NotImplementedError


class EmbedderTokenEncoder(TokenEncoder):
    """A token encoder built on its own ``self.embedder`` (recurrent, transformer)."""

    embedder: nn.Module

    @property
    def token_embedder(self) -> nn.Module:
        return self.embedder

    def set_token_embedder(self, module: nn.Module) -> None:
        self.embedder = module
