"""Decoders of Dual-VAEs and Cross-VAEs: a latent ``z[B, Z]`` to scores of a text's tokens.

Every decoder has ``forward(z, input_ids[B, L], attention_mask[B, L]) -> (logits, targets,
mask)``, ready for :class:`retrieval_qa.losses.reconstruction.TokenReconstructionLoss`:

* the **targets** are the text's tokens after the first, ``input_ids[:, 1:]``, where
  ``attention_mask[:, 1:]`` is 1. With BERT-style tokenizers that is the word pieces and the
  closing ``[SEP]`` (the end-of-sequence token); the leading ``[CLS]`` serves as the
  beginning-of-sequence input of the GRU decoder and is never predicted.
* :class:`GRUDecoder` (paper section 3.2, "another GRU for generating token sequence
  conditioned on the latent variables"): ``z`` sets the initial hidden state
  (``h_0 = tanh(W z + b)``, one slice per layer), teacher forcing feeds the gold previous
  token, ``logits[B, L-1, V]`` give ``p(x_t | x_<t, z)``.
* :class:`MLPDecoder` (section 4.3, "multi-layer perceptrons with one 768 units hidden
  layer"): an MLP can only emit a fixed-size output, so it reconstructs the text as a **bag of
  words**: one distribution ``p(w | z) = softmax(MLP(z))`` over the vocabulary, and
  ``log p(x | z) = sum_t log p(x_t | z)`` over the same target tokens as the GRU decoder
  (the multinomial likelihood of the token counts, order ignored; the NVDM decoder of Miao et
  al. 2016, which the paper cites). ``logits[B, V]`` are shared by every position.

Output vocabulary (what keeps a 30,522-way softmax affordable on a CPU):

* ``tie_embeddings=True`` (conf/model/vae.yaml's): the output matrix is the input
  token-embedding table ``E[V, E]``
  of the tower that reads the same side's texts (a decoder of questions uses the question
  tower's table): ``logits = (W h + b) E^T + c`` with ``W: H -> E`` and a per-token bias
  ``c``. No ``H x V`` layer (23M parameters and their Adam state at H = 768) is added.
  ``tie_embeddings=False``: a separate ``Linear(H, V)``.
* :meth:`OutputLayer.restrict`: score only a subset of ids (e.g. every token present in the
  training texts of that side, :func:`training_vocabulary`), mapping the targets to positions
  in the subset. When the subset holds every id that occurs as a target, the reconstructed
  tokens are unchanged; only ids that can never be a target leave the softmax's normaliser.
  A target outside the subset is not scored (its mask is cleared), so a subset built from
  other texts never raises; build it from the training texts to keep the objective exact.
  The subset is a non-persistent buffer (not in checkpoints: rebuilt by the training module
  at ``setup``; decoders are training-only anyway). On ReQA SQuAD it keeps about 26k of
  30,522 ids (23k for 20,000 pairs): a modest saving, so the GRU decoder stays costly on a
  CPU (a step of the CPU profile, batch 64, hidden 256, one thread: about 12 s with GRU
  decoders, 1.3 s with MLP decoders) and the CPU profiles use the MLP decoder.

The input embedding table is shared with the tower (as is the tied output matrix), so the
decoder's gradient also trains the encoder's token embeddings (unless they are frozen).

``model.decoder`` names the decoder class: its ``_target_`` (:class:`GRUDecoder`,
:class:`MLPDecoder` or a class of one's own, given ``latent_dim`` and ``embedding``), or the
short names ``type: gru | mlp`` of retrieval_qa/registry.py; its other keys are the class's
arguments, and ``output_vocab`` (``full`` | ``train``), which the training module applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from ..config import plain
from ..registry import instantiate, require_keys
from .token_embedder import TokenEmbedder
from .token_encoder import TokenEncoder

OUTPUT_VOCABS = ("full", "train")

__all__ = [
    "OUTPUT_VOCABS",
    "GRUDecoder",
    "MLPDecoder",
    "OutputLayer",
    "TextDecoder",
    "build_decoder",
    "shift_targets",
    "training_vocabulary",
    "word_embedding",
]


def word_embedding(token_encoder: TokenEncoder) -> nn.Embedding:
    """The ``nn.Embedding`` of a token encoder's word pieces (a :class:`TokenEmbedder`'s
    table, or a Hugging Face model's input embeddings).

    Args:
        token_encoder: the tower's token encoder (its ``token_embedder``, or its Hugging Face
            ``model``); ``TypeError`` when it has no word-embedding table.
    """
    embedder = token_encoder.token_embedder
    if isinstance(embedder, TokenEmbedder):
        return embedder.embedding
    if isinstance(embedder, nn.Embedding):
        return embedder
    words = getattr(embedder, "word_embeddings", None)
    if isinstance(words, nn.Embedding):
        return words
    model = getattr(token_encoder, "model", None)
    if model is not None and hasattr(model, "get_input_embeddings"):
        return model.get_input_embeddings()
    raise TypeError(f"no word-embedding table found in {type(token_encoder).__name__}")


def shift_targets(input_ids: torch.Tensor, attention_mask: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(targets[B, L-1], mask[B, L-1])``: every token after the first, real tokens only.

    Args:
        input_ids: ``[B, L]`` token ids of the texts.
        attention_mask: ``[B, L]``, 1 at real tokens.

    Example:

        >>> import torch
        >>> targets, mask = shift_targets(torch.tensor([[101, 7, 102, 0]]),
        ...                               torch.tensor([[1, 1, 1, 0]]))
        >>> targets.tolist(), mask.tolist()
        ([[7, 102, 0]], [[True, True, False]])
    """
    return input_ids[:, 1:], attention_mask[:, 1:].to(torch.bool)


class OutputLayer(nn.Module):
    """``h[..., H] -> logits[..., V']`` over the output vocabulary (see the module docstring):
    tied to ``embedding`` or a separate matrix, all ``V`` ids or a restricted subset ``V'``.

    Args:
        in_dim: ``H``, the width of the decoder's hidden states.
        embedding: the token table ``[V, E]``; its ``V`` is the vocabulary size, and with
            ``tie`` its weight is the output matrix.
        tie: score with ``embedding``'s table (through a ``Linear(H, E)``); False: a separate
            ``[V, H]`` matrix.
    """

    def __init__(self, in_dim: int, embedding: nn.Embedding, *, tie: bool) -> None:
        super().__init__()
        self.vocab_size = int(embedding.num_embeddings)
        self.tie = tie
        if tie:
            self.embedding = embedding
            self.to_embedding = nn.Linear(in_dim, embedding.embedding_dim)
        else:
            self.embedding = None
            self.weight = nn.Parameter(torch.empty(self.vocab_size, in_dim))
            nn.init.normal_(self.weight, std=in_dim ** -0.5)
        self.bias = nn.Parameter(torch.zeros(self.vocab_size))
        self.register_buffer("kept", None, persistent=False)       # [V'] ids, or None
        self.register_buffer("position", None, persistent=False)   # [V] id -> index or -1

    @property
    def output_size(self) -> int:
        return self.vocab_size if self.kept is None else int(self.kept.numel())

    def restrict(self, ids: Sequence[int] | torch.Tensor | None) -> None:
        """Score only ``ids`` (deduplicated, sorted); None restores the full vocabulary."""
        if ids is None:
            self.kept = self.position = None
            return
        device = self.bias.device
        kept = torch.unique(torch.as_tensor(ids, dtype=torch.long)).to(device)
        if kept.numel() == 0 or kept.min() < 0 or kept.max() >= self.vocab_size:
            raise ValueError(f"output ids must be a non-empty subset of [0, {self.vocab_size})")
        position = torch.full((self.vocab_size,), -1, dtype=torch.long, device=device)
        position[kept] = torch.arange(kept.numel(), device=device)
        self.kept, self.position = kept, position

    def map_targets(self, targets: torch.Tensor, mask: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids -> output positions; targets outside the output vocabulary are masked."""
        if self.position is None:
            return targets, mask
        positions = self.position[targets]
        return positions.clamp(min=0), mask & (positions >= 0)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.tie:
            hidden = self.to_embedding(hidden)
            matrix = self.embedding.weight
        else:
            matrix = self.weight
        bias = self.bias
        if self.kept is not None:
            matrix, bias = matrix[self.kept], bias[self.kept]
        return hidden @ matrix.T + bias


class TextDecoder(nn.Module):
    """``forward(z[B, Z], input_ids[B, L], attention_mask[B, L]) -> (logits, targets, mask)``;
    logits ``[B, L-1, V']`` (sequence) or ``[B, V']`` (bag of words), targets and mask
    ``[B, L-1]`` (targets as positions in the output vocabulary)."""

    output: OutputLayer

    def restrict(self, ids: Sequence[int] | torch.Tensor | None) -> None:
        self.output.restrict(ids)


class GRUDecoder(TextDecoder):
    """A GRU language model conditioned on ``z`` through its initial state, trained with
    teacher forcing (module docstring). ``embedding``: the token table for its inputs (and,
    tied, its outputs). Padding never matters: the recurrence is causal, padding comes
    after the real tokens, and padded targets are masked.

    Args:
        latent_dim: Z. embedding: the token table. hidden_size: H of the GRU (paper: 768).
        num_layers: GRU layers. dropout: on its inputs and outputs (and between layers).
        tie_embeddings: the output matrix is ``embedding`` (module docstring).

    Example::

        decoder = GRUDecoder(512, embedding, hidden_size=768, num_layers=1, dropout=0.1,
                             tie_embeddings=True)
        logits, targets, mask = decoder(z, input_ids, attention_mask)
    """

    def __init__(self, latent_dim: int, embedding: nn.Embedding, *, hidden_size: int,
                 num_layers: int, dropout: float, tie_embeddings: bool) -> None:
        super().__init__()
        self.hidden_size, self.num_layers = hidden_size, num_layers
        self.embedding = embedding
        self.init_state = nn.Linear(latent_dim, num_layers * hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.rnn = nn.GRU(embedding.embedding_dim, hidden_size, num_layers=num_layers,
                          batch_first=True, dropout=dropout if num_layers > 1 else 0.0)
        self.output = OutputLayer(hidden_size, embedding, tie=tie_embeddings)

    def initial_state(self, z: torch.Tensor) -> torch.Tensor:
        """``h_0[num_layers, B, H] = tanh(W z + b)``."""
        h = torch.tanh(self.init_state(z)).view(z.shape[0], self.num_layers, self.hidden_size)
        return h.transpose(0, 1).contiguous()

    def forward(self, z: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        targets, mask = shift_targets(input_ids, attention_mask)
        inputs = self.dropout(self.embedding(input_ids[:, :-1]))
        states, _ = self.rnn(inputs, self.initial_state(z))
        logits = self.output(self.dropout(states))
        targets, mask = self.output.map_targets(targets, mask)
        return logits, targets, mask


class MLPDecoder(TextDecoder):
    """Bag-of-words decoder: ``z -> Linear(Z, H) -> ReLU -> dropout -> output layer``, one
    distribution over the vocabulary per text (module docstring; paper: H = 768).

    Args: as :class:`GRUDecoder`'s, without ``num_layers``.

    Example::

        decoder = MLPDecoder(512, embedding, hidden_size=768, dropout=0.1, tie_embeddings=True)
    """

    def __init__(self, latent_dim: int, embedding: nn.Embedding, *, hidden_size: int,
                 dropout: float, tie_embeddings: bool) -> None:
        super().__init__()
        self.hidden = nn.Sequential(nn.Linear(latent_dim, hidden_size), nn.ReLU(),
                                    nn.Dropout(dropout))
        self.output = OutputLayer(hidden_size, embedding, tie=tie_embeddings)

    def forward(self, z: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        targets, mask = shift_targets(input_ids, attention_mask)
        logits = self.output(self.hidden(z))
        targets, mask = self.output.map_targets(targets, mask)
        return logits, targets, mask


def decoder_config(cfg: Any) -> dict[str, Any]:
    """The ``decoder`` block as a plain dict, its ``output_vocab`` checked.

    Args:
        cfg: ``model.decoder`` (dict or OmegaConf; conf/model/vae.yaml).
    """
    full = plain(cfg)
    require_keys(full, ("output_vocab",), "model.decoder")
    if full["output_vocab"] not in OUTPUT_VOCABS:
        raise ValueError(f"decoder.output_vocab={full['output_vocab']!r}; expected one of "
                         f"{list(OUTPUT_VOCABS)}")
    return full


def build_decoder(cfg: Any, latent_dim: int, embedding: nn.Embedding) -> TextDecoder:
    """The decoder that the ``decoder`` block names (its ``_target_``, or ``type: gru |
    mlp``), over latents of ``latent_dim`` and the token table ``embedding``.

    Args:
        cfg: ``model.decoder`` (dict or OmegaConf; conf/model/vae.yaml); its keys other than
            the class's name and ``output_vocab`` are the class's arguments.
        latent_dim: ``Z``, the latents' size.
        embedding: the token table of the tower that reads the same side's texts.
    """
    return instantiate(decoder_config(cfg), "model.decoder", "decoder", latent_dim=latent_dim,
                       embedding=embedding)


def training_vocabulary(tokenizer, texts: Sequence[str], max_length: int,
                        contexts: Sequence[str] | None = None, chunk: int = 2048
                        ) -> torch.Tensor:
    """The sorted ids of every target token of ``texts`` tokenised as in training (same
    truncation, contexts as second segments when given): the output vocabulary that keeps
    the reconstruction objective exact on these texts.

    Args:
        tokenizer: the tower's Hugging Face tokenizer.
        texts: the training texts of one side.
        max_length: the truncation length, in tokens (as in training).
        contexts: second segments, one per text; None: none.
        chunk: texts tokenised at a time.

    Returns:
        A ``[V']`` long tensor of the sorted ids.
    """
    from ..data.collate import encode_texts

    seen: set[int] = set()
    for lo in range(0, len(texts), chunk):
        part = list(texts[lo:lo + chunk])
        ctx = list(contexts[lo:lo + chunk]) if contexts is not None else None
        enc = encode_texts(tokenizer, part, max_length, ctx)
        targets, mask = shift_targets(enc["input_ids"], enc["attention_mask"])
        seen.update(targets[mask].unique().tolist())
    return torch.tensor(sorted(seen), dtype=torch.long)
