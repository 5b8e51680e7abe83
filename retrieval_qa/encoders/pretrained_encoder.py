"""A Hugging Face AutoModel (BERT, MiniLM, ...) or the encoder of an encoder-decoder (T5)
as a token encoder."""

from __future__ import annotations

import inspect

import torch
from torch import nn

from ..pretrained import ResolvedCheckpoint, load_model, resolve_pretrained
from .token_encoder import TokenEncoder


class PretrainedTokenEncoder(TokenEncoder):
    """``forward(input_ids[B, L], attention_mask[B, L], token_type_ids[B, L] | None)
    -> last_hidden_state[B, L, H]``.

    Args:
        model: any ``transformers`` model whose output has ``last_hidden_state`` (for T5, the
            ``T5EncoderModel`` that :func:`~retrieval_qa.pretrained.load_model` gives).
        gradient_checkpointing: recompute activations in the backward pass (saves memory).
        checkpoint: the :class:`ResolvedCheckpoint` the model was loaded from (None: not
            recorded; ``from_pretrained`` sets it).

    ``token_type_ids`` are passed only when given and when the model takes them (T5 has no
    segment embeddings: they are left out). The token embedder is the model's ``embeddings``
    module (for BERT: word, position and token-type tables plus their LayerNorm), or its input
    embeddings when it has no such module (T5: the ``shared`` table, which its encoder reads).
    Freezing it (ADE-FTE) freezes the embedding tables; the LayerNorm stays trainable.
    ``checkpoint`` records the :class:`ResolvedCheckpoint` when built with ``from_pretrained``.
    ``input_offset``, when given, is added to every token's word embedding before the
    model's own embedding layer adds positions and token types.

    Example:

        >>> import torch
        >>> from transformers import BertConfig, BertModel
        >>> bert = BertModel(BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1,
        ...                             num_attention_heads=2, intermediate_size=32))
        >>> encoder = PretrainedTokenEncoder(bert, gradient_checkpointing=False)
        >>> encoder(torch.randint(1, 100, (2, 7)), torch.ones(2, 7)).shape
        torch.Size([2, 7, 16])
        >>> minilm = PretrainedTokenEncoder.from_pretrained(  # doctest: +SKIP
        ...     "minilm", gradient_checkpointing=False)
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        gradient_checkpointing: bool,
        checkpoint: ResolvedCheckpoint | None = None,
    ) -> None:
        super().__init__()
        self.model = model
        self.hidden_size = int(model.config.hidden_size)
        self.checkpoint = checkpoint
        self.takes_token_types = "token_type_ids" in inspect.signature(model.forward).parameters
        if gradient_checkpointing:
            enable = getattr(model, "activation_checkpointing_enable", None)
            if enable is not None:
                enable(activation_checkpointing_kwargs={"use_reentrant": False})
            else:
                model.gradient_checkpointing_enable(
                    gradient_checkpointing_kwargs={"use_reentrant": False}
                )

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | ResolvedCheckpoint,
        *,
        gradient_checkpointing: bool,
        fallback: str | None = None,
        allow_network: bool | None = None,
    ) -> PretrainedTokenEncoder:
        """Resolve ``name_or_path`` (see :mod:`retrieval_qa.pretrained`) and load it."""
        resolved = (
            name_or_path if isinstance(name_or_path, ResolvedCheckpoint)
            else resolve_pretrained(name_or_path, allow_network=allow_network, fallback=fallback)
        )
        return cls(load_model(resolved), gradient_checkpointing=gradient_checkpointing,
                   checkpoint=resolved)

    @property
    def token_embedder(self) -> nn.Module:
        embeddings = getattr(self.model, "embeddings", None)
        if isinstance(embeddings, nn.Module):
            return embeddings
        return self.model.get_input_embeddings()

    @property
    def input_dim(self) -> int:
        return int(self.model.get_input_embeddings().embedding_dim)

    def set_token_embedder(self, module: nn.Module) -> None:
        if isinstance(getattr(self.model, "embeddings", None), nn.Module):
            self.model.embeddings = module
        else:
            self.model.set_input_embeddings(module)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        input_offset: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if input_offset is None:
            kwargs = {"input_ids": input_ids}
        else:
            words = self.model.get_input_embeddings()(input_ids)
            kwargs = {"inputs_embeds": words + input_offset.to(words.dtype)}
        kwargs["attention_mask"] = attention_mask
        if token_type_ids is not None and self.takes_token_types:
            kwargs["token_type_ids"] = token_type_ids
        return self.model(**kwargs).last_hidden_state
