"""A small Transformer token encoder over a token-embedding table (Dual-Transformers)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .token_embedder import TokenEmbedder
from .token_encoder import EmbedderTokenEncoder

POSITION_KINDS = ("learned", "sinusoidal")


def sinusoidal_positions(max_positions: int, dim: int) -> torch.Tensor:
    """The ``[max_positions, dim]`` sine/cosine table of Vaswani et al. (2017).

    Args:
        max_positions: the table's rows (positions 0 .. max_positions - 1).
        dim: the width; even columns hold sines, odd columns cosines.

    Example:

        >>> sinusoidal_positions(2, 4)[0]
        tensor([0., 1., 0., 1.])
    """
    position = torch.arange(max_positions, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(max_positions, dim)
    table[:, 0::2] = torch.sin(position * div)
    table[:, 1::2] = torch.cos(position * div)[:, : dim // 2]
    return table


class TransformerTokenEncoder(EmbedderTokenEncoder):
    """``forward(input_ids[B, L], attention_mask[B, L], token_type_ids=None) -> states[B, L, H]``.

    Args:
        embedder: the :class:`TokenEmbedder` (E-dimensional vectors); when E != H a linear
            layer maps them to H.
        hidden_size: H (d_model); must be divisible by ``num_heads``.
        num_layers: ENDX section 4.4 uses 2.
        num_heads: ENDX uses 12.
        feedforward_dim: the feed-forward width; None: 4 * H.
        dropout: the dropout of the embeddings and of the layers.
        positions: ``"learned"`` (conf/'s; a table initialised N(0, 0.02) like BERT's, which
            keeps the position signal on the scale of pretrained word embeddings, about 0.05
            per unit) or ``"sinusoidal"`` (Vaswani et al.; unit amplitude, so it dominates
            small pretrained embeddings at the start of training).
        max_positions: bounds L for either kind of positions.

    The sum of word and position vectors goes through LayerNorm and dropout, then a post-LN
    ``nn.TransformerEncoder`` (GELU) with ``src_key_padding_mask`` so padded keys are never
    attended to. ``token_type_ids`` are accepted and ignored.

    The settings are the keys of ``model.towers.encoder`` (conf/model/dual_encoder.yaml;
    ``type: transformer`` names this class).

    Example:

        >>> import torch
        >>> from retrieval_qa.encoders import TokenEmbedder
        >>> encoder = TransformerTokenEncoder(TokenEmbedder(100, 16, padding_idx=0),
        ...                                   hidden_size=32, num_layers=2, num_heads=4,
        ...                                   feedforward_dim=None, dropout=0.1,
        ...                                   positions="learned", max_positions=512)
        >>> ids = torch.randint(1, 100, (2, 7))
        >>> mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
        >>> encoder(ids, mask).shape
        torch.Size([2, 7, 32])
    """

    def __init__(
        self,
        embedder: TokenEmbedder,
        *,
        hidden_size: int,
        num_layers: int,
        num_heads: int,
        feedforward_dim: int | None,
        dropout: float,
        positions: str,
        max_positions: int,
    ) -> None:
        super().__init__()
        if positions not in POSITION_KINDS:
            raise ValueError(f"positions={positions!r}; expected one of {list(POSITION_KINDS)}")
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not divisible by num_heads {num_heads}")
        self.hidden_size = hidden_size
        self.positions = positions
        self.max_positions = max_positions
        self.embedder = embedder
        self.input_projection = (
            nn.Linear(embedder.embedding_dim, hidden_size)
            if embedder.embedding_dim != hidden_size else nn.Identity()
        )
        if positions == "learned":
            self.position_embedding = nn.Embedding(max_positions, hidden_size)
            nn.init.normal_(self.position_embedding.weight, std=0.02)
        else:
            self.register_buffer(
                "position_table", sinusoidal_positions(max_positions, hidden_size), persistent=False
            )
        self.norm = nn.LayerNorm(hidden_size)
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(
            d_model=hidden_size,
            nhead=num_heads,
            dim_feedforward=feedforward_dim or 4 * hidden_size,
            dropout=dropout,
            activation="gelu",
            batch_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        input_offset: torch.Tensor | None = None,
    ) -> torch.Tensor:
        length = input_ids.shape[1]
        if length > self.max_positions:
            raise ValueError(f"sequence length {length} exceeds max_positions {self.max_positions}")
        x = self.input_projection(self.embed(input_ids, input_offset))
        if self.positions == "learned":
            x = x + self.position_embedding.weight[:length]
        else:
            x = x + self.position_table[:length].to(x.dtype)
        x = self.dropout(self.norm(x))
        padding = attention_mask == 0
        states = self.encoder(x, src_key_padding_mask=padding)
        return states.masked_fill(padding.unsqueeze(-1), 0.0)
