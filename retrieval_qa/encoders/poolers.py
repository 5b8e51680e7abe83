"""Poolers: token states ``[B, L, H]`` and a mask ``[B, L]`` to one vector ``[B, D]``.

Every pooler has ``output_dim`` (D); ``pool(states, mask) -> (pooled, penalty)`` returns its
regulariser with the pooled batch (a scalar tensor, 0 unless the pooler regularises itself),
so no penalty is kept between calls.
"""

from __future__ import annotations

import torch
from torch import nn

COMBINE_MODES = ("concat", "mean")


class Pooler(nn.Module):
    """``forward(states[B, L, H], attention_mask[B, L]) -> pooled[B, output_dim]``;
    ``pool(...)`` gives ``(pooled, penalty)``.

    The base class of the poolers; a subclass takes ``hidden_size`` (H) and sets
    ``output_dim``. ``attention_mask`` is 1 for tokens, 0 for padding.

    Example:

        >>> import torch
        >>> pooled, penalty = MeanPooler(4).pool(torch.ones(2, 3, 4), torch.ones(2, 3))
        >>> pooled.shape, float(penalty)
        (torch.Size([2, 4]), 0.0)
    """

    output_dim: int

    def pool(self, states: torch.Tensor, attention_mask: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """The pooled batch and its regulariser (0 for poolers without one)."""
        return self(states, attention_mask), states.new_zeros((), dtype=torch.float32)


class MeanPooler(Pooler):
    """Mean of the states of real tokens (mask 1); D = H.

    Args:
        hidden_size: H, the width of the token states.

    Example:

        >>> import torch
        >>> states = torch.tensor([[[1.0], [3.0], [100.0]]])  # [1, 3, 1], the last is padding
        >>> MeanPooler(1)(states, torch.tensor([[1, 1, 0]]))
        tensor([[2.]])
    """

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.output_dim = hidden_size

    def forward(self, states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = attention_mask.unsqueeze(-1).to(states.dtype)
        return (states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)


class ClsPooler(Pooler):
    """The state of the first token (BERT's [CLS]); D = H.

    Args:
        hidden_size: H, the width of the token states.

    Example:

        >>> import torch
        >>> states = torch.tensor([[[1.0], [3.0]]])
        >>> ClsPooler(1)(states, torch.ones(1, 2))
        tensor([[1.]])
    """

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.output_dim = hidden_size

    def forward(self, states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return states[:, 0]


def attention_penalty(attention: torch.Tensor) -> torch.Tensor:
    """``mean_b ||A_b A_b^T - I||_F^2`` for attention ``A[B, r, L]`` (Lin et al. 2017, eq. 8).

    Args:
        attention: ``[B, r, L]``, each hop's distribution over the L positions.

    Example:

        >>> import torch
        >>> attention_penalty(torch.eye(2).unsqueeze(0))  # two hops on two distinct tokens
        tensor(0.)
        >>> attention_penalty(torch.tensor([[[1.0, 0.0], [1.0, 0.0]]]))  # both on one token
        tensor(2.)
    """
    gram = attention @ attention.transpose(1, 2)
    eye = torch.eye(attention.shape[1], device=attention.device, dtype=attention.dtype)
    return ((gram - eye) ** 2).sum(dim=(1, 2)).mean()


class MultiHopSelfAttentionPooler(Pooler):
    """Structured self-attention of Lin et al. (2017), the ENDX aggregator.

    ``A = softmax(W_s2 tanh(W_s1 H^T))`` with ``W_s1[d_a, H]`` and ``W_s2[r, d_a]`` (no
    biases), softmax over the L positions of each of the r hops, padded positions masked out
    (they get weight 0, so padding never changes the result). ``M = A H`` is ``[B, r, H]``.

    Args:
        hidden_size: H, the width of the token states.
        hops: r (conf/: 4).
        attention_dim: d_a (conf/: 350, Lin et al.'s value).
        combine: ``"concat"`` (conf/'s) flattens M to ``[B, r * H]`` as Lin et al. do,
            keeping what each hop found; ``"mean"`` averages the hops to ``[B, H]``, keeping
            the embedding at the encoder's width (smaller index, and the same width as a
            mean or CLS pooler).

    Penalty: ``pool()`` returns ``P = mean_b ||A A^T - I||_F^2`` (with its graph) beside the
    pooled batch; ``attention()`` gives ``A`` for inspection. P pushes the hops to attend to
    different tokens, each to few tokens. The training loss adds it once per encoded batch
    with a coefficient: ``loss = retrieval_loss + penalty_coef * P_q + penalty_coef * P_a``
    (``DualTowers.encode_pair`` sums the two; Lin et al. add ``coef * P`` to the task loss;
    the coefficient is a hyper-parameter, 0 disables it).

    Example:

        >>> import torch
        >>> pooler = MultiHopSelfAttentionPooler(8, hops=2, attention_dim=4, combine="concat")
        >>> states, mask = torch.randn(3, 5, 8), torch.tensor([[1] * 5, [1] * 3 + [0] * 2,
        ...                                                     [1] * 1 + [0] * 4])
        >>> pooled, penalty = pooler.pool(states, mask)
        >>> pooled.shape, penalty.shape
        (torch.Size([3, 16]), torch.Size([]))
        >>> bool((pooler.attention(states, mask)[1, :, 3:] == 0).all())  # padding: weight 0
        True
    """

    def __init__(self, hidden_size: int, *, hops: int, attention_dim: int, combine: str) -> None:
        """``hops``, ``attention_dim`` and ``combine``: the ``pooler`` section of a towers
        config (conf/model/dual_encoder.yaml holds their values; :func:`.builders.build_pooler`)."""
        super().__init__()
        if combine not in COMBINE_MODES:
            raise ValueError(f"combine={combine!r}; expected one of {list(COMBINE_MODES)}")
        if hops < 1:
            raise ValueError(f"hops must be >= 1, got {hops}")
        self.hops = hops
        self.combine = combine
        self.ws1 = nn.Linear(hidden_size, attention_dim, bias=False)
        self.ws2 = nn.Linear(attention_dim, hops, bias=False)
        self.output_dim = hops * hidden_size if combine == "concat" else hidden_size

    def attention(self, states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``A[B, r, L]``: per hop, a distribution over the real tokens."""
        scores = self.ws2(torch.tanh(self.ws1(states))).transpose(1, 2)  # [B, r, L]
        keep = attention_mask.unsqueeze(1).bool()
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
        # A row with no real token would be uniform over padding: zero it instead.
        return torch.softmax(scores, dim=-1) * keep.to(scores.dtype)

    def _combine(self, attention: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
        pooled = attention @ states  # [B, r, H]
        return pooled.flatten(start_dim=1) if self.combine == "concat" else pooled.mean(dim=1)

    def pool(self, states: torch.Tensor, attention_mask: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
        attention = self.attention(states, attention_mask)
        return self._combine(attention, states), attention_penalty(attention)

    def forward(self, states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self._combine(self.attention(states, attention_mask), states)
