"""RNN / GRU / LSTM token encoders over a token-embedding table (Dual-RNNs/GRUs/LSTMs)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .token_embedder import TokenEmbedder
from .token_encoder import EmbedderTokenEncoder

RECURRENT_KINDS = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}


class RecurrentTokenEncoder(EmbedderTokenEncoder):
    """``forward(input_ids[B, L], attention_mask[B, L], token_type_ids=None) -> states[B, L, H]``.

    Args:
        embedder: the :class:`TokenEmbedder` (E-dimensional vectors).
        kind: ``"rnn"`` (tanh), ``"gru"`` or ``"lstm"``.
        hidden_size: H, the size of each output state. When ``bidirectional`` the forward
            and backward directions have H // 2 units each and are concatenated, so H stays
            the same whichever the direction (H must then be even).
        num_layers: ENDX section 4.4 uses 2 ("2 layers over 768-d BERT token embeddings").
        bidirectional: the papers do not say; the multi-hop self-attention aggregator they
            use comes from Lin et al. (2017), which runs it over a BiLSTM, and every state
            then sees the whole sentence, as BERT's do. Keeping H fixed (768 in conf/) keeps
            these encoders interchangeable with BERT-sized ones and H divisible by ENDX's 12
            cross-attention heads.
        dropout: applied to the embeddings and between recurrent layers.

    The settings are the keys of ``model.towers.encoder`` (conf/model/dual_encoder.yaml);
    ``type: gru | lstm | rnn`` names this class with ``kind``.

    Example:

        >>> import torch
        >>> from retrieval_qa.encoders import TokenEmbedder
        >>> encoder = RecurrentTokenEncoder(TokenEmbedder(100, 16, padding_idx=0), kind="gru",
        ...                                 hidden_size=32, num_layers=2, bidirectional=True,
        ...                                 dropout=0.1)
        >>> ids = torch.randint(1, 100, (2, 7))
        >>> mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
        >>> states = encoder(ids, mask)
        >>> states.shape, bool((states[1, 4:] == 0).all())  # padded positions are 0
        (torch.Size([2, 7, 32]), True)

    Sequences are packed by length (``attention_mask.sum(1)``), so padding never enters the
    recurrence: a state does not change when more padding is appended, and the backward
    direction starts at the last real token. States at padded positions are 0.
    ``token_type_ids`` are accepted for interface compatibility and ignored.
    """

    def __init__(
        self,
        embedder: TokenEmbedder,
        *,
        kind: str,
        hidden_size: int,
        num_layers: int,
        bidirectional: bool,
        dropout: float,
    ) -> None:
        super().__init__()
        if kind not in RECURRENT_KINDS:
            raise ValueError(f"kind={kind!r}; expected one of {sorted(RECURRENT_KINDS)}")
        if bidirectional and hidden_size % 2:
            raise ValueError(f"bidirectional needs an even hidden_size, got {hidden_size}")
        self.kind = kind
        self.hidden_size = hidden_size
        self.bidirectional = bidirectional
        self.embedder = embedder
        self.dropout = nn.Dropout(dropout)
        self.rnn = RECURRENT_KINDS[kind](
            input_size=embedder.embedding_dim,
            hidden_size=hidden_size // 2 if bidirectional else hidden_size,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,
        )

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        input_offset: torch.Tensor | None = None,
    ) -> torch.Tensor:
        total_length = input_ids.shape[1]
        lengths = attention_mask.long().sum(dim=1).clamp(min=1).cpu()
        embedded = self.dropout(self.embed(input_ids, input_offset))
        packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        output, _ = self.rnn(packed)
        states, _ = pad_packed_sequence(output, batch_first=True, total_length=total_length)
        return states
