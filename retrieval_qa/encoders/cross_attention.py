"""ENDX cross attention (paper section 3.3, eqs. 2-4).

One :class:`CrossAttentionBlock` refines the token states of one text (the *refined* text)
under the guidance of the matched other text (the *guide* text). For refining the question
``H_q`` (``N`` tokens) by the answer ``H_a`` (``M`` tokens), eq. 2 reads::

    head_i = softmax( H_a W_q^i (H_q W_k^i)^T / sqrt(d_h) ) H_q W_v^i        (2)
    H'_q   = [head_1; ...; head_lh] W_o                                     (3)
    H^cross_q = LayerNorm(H'_q + FFN(H'_q))                                 (4)

so the attention *queries* come from the guide text (the answer) and the keys/values from the
refined text (the question): ``H^cross_q`` has one row per *answer* token, ``M x d_r``, as
the paper states. Consequences that callers must respect:

* the key padding mask is the refined text's mask (padded question tokens are never attended);
* the output rows follow the guide text, so the mask to use downstream (pooling) is the
  guide text's mask, which :meth:`CrossAttentionBlock.forward` returns as ``out_mask``.

Faithful to eqs. 3-4, there is no residual connection from the guide states around the
attention and no LayerNorm before the FFN; the only residual is ``H' + FFN(H')``. The FFN is
the position-wise network of Vaswani et al. (2017): ``Linear(d_r, ffn_dim) -> act ->
Linear(ffn_dim, d_r)``; the paper names no width or activation, so ``ffn_dim`` defaults to
``4 * d_r`` and the activation to ReLU (Vaswani et al.). Dropout (``dropout``) is applied to the
attention probabilities and to the FFN output before the residual sum, as in the Transformer.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["CrossAttentionBlock", "as_bool_mask"]

_ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU}


def as_bool_mask(mask: torch.Tensor | None, states: torch.Tensor) -> torch.Tensor:
    """Return ``mask`` (``[B, L]``, 1/True = real token) as a bool tensor; all-True if None.

    Args:
        mask: ``[B, L]`` attention mask (bool or 0/1), or None.
        states: the token states ``[B, L, H]`` it masks (their shape and device).
    """
    if mask is None:
        return torch.ones(states.shape[:2], dtype=torch.bool, device=states.device)
    if mask.shape != states.shape[:2]:
        raise ValueError(
            f"mask shape {tuple(mask.shape)} does not match states shape {tuple(states.shape)}"
        )
    return mask.to(device=states.device, dtype=torch.bool) if mask.dtype != torch.bool else mask


class CrossAttentionBlock(nn.Module):
    """Multi-head cross attention + FFN + LayerNorm, eqs. 2-4 of ENDX.

    Args:
        hidden_size: ``d_r``, the width of the token states (input and output).
        num_heads: ``l_h``; ``d_h = hidden_size // num_heads``. The paper uses 12 (section 4.4).
        ffn_dim: inner width of the FFN; None: ``4 * hidden_size``.
        dropout: dropout on attention probabilities and on the FFN output.
        activation: FFN activation, ``"relu"`` (Vaswani et al.) or ``"gelu"``.
        layer_norm_eps: epsilon of the LayerNorm of eq. 4.

    Raises:
        ValueError: if ``hidden_size`` is not divisible by ``num_heads``.
    """

    def __init__(
        self,
        hidden_size: int,
        *,
        num_heads: int,
        ffn_dim: int | None,
        dropout: float,
        activation: str,
        layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        if num_heads <= 0:
            raise ValueError(f"num_heads must be positive, got {num_heads}")
        if hidden_size % num_heads != 0:
            raise ValueError(
                f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads}); "
                f"the per-head width d_h = hidden_size / num_heads must be an integer"
            )
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.ffn_dim = ffn_dim if ffn_dim is not None else 4 * hidden_size

        # W_q^i, W_k^i, W_v^i for all heads stacked into one matrix each; W_o of eq. 3.
        self.w_q = nn.Linear(hidden_size, hidden_size)
        self.w_k = nn.Linear(hidden_size, hidden_size)
        self.w_v = nn.Linear(hidden_size, hidden_size)
        self.w_o = nn.Linear(hidden_size, hidden_size)
        self.attn_dropout = nn.Dropout(dropout)
        self.ffn = nn.Sequential(
            nn.Linear(hidden_size, self.ffn_dim),
            _ACTIVATIONS[activation](),
            nn.Linear(self.ffn_dim, hidden_size),
            nn.Dropout(dropout),
        )
        self.layer_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        b, length, _ = x.shape
        return x.view(b, length, self.num_heads, self.head_dim).transpose(1, 2)  # [B, h, L, d_h]

    def forward(
        self,
        refined_states: torch.Tensor,
        refined_mask: torch.Tensor | None,
        guide_states: torch.Tensor,
        guide_mask: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Refine ``refined_states`` under the guidance of ``guide_states``.

        Args:
            refined_states: ``[B, N, H]``, the text being refined (``H_q`` in eq. 2); it
                provides keys and values.
            refined_mask: ``[B, N]``, 1/True for real tokens (key padding mask); None = no padding.
            guide_states: ``[B, M, H]``, the matched other text (``H_a`` in eq. 2); it provides
                the queries, one per guide token. Row ``b`` must be the match of row ``b`` of
                ``refined_states``.
            guide_mask: ``[B, M]``, 1/True for real guide tokens; None = no padding.

        Returns:
            ``(out, out_mask)``: ``out`` is ``[B, M, H]`` (``H^cross`` of eq. 4, one row per
            guide token) and ``out_mask`` is the guide mask as bool ``[B, M]``. Rows at padded
            guide positions are zeroed. A sample whose refined text is entirely padding gets
            zero attention output (``H' = 0``) instead of NaN.
        """
        if refined_states.dim() != 3 or guide_states.dim() != 3:
            raise ValueError("refined_states and guide_states must be [B, L, H] tensors")
        if refined_states.shape[0] != guide_states.shape[0]:
            raise ValueError(
                f"batch sizes differ: refined {refined_states.shape[0]} vs "
                f"guide {guide_states.shape[0]} (inputs must be matched pairs)"
            )
        for name, t in (("refined_states", refined_states), ("guide_states", guide_states)):
            if t.shape[-1] != self.hidden_size:
                raise ValueError(f"{name} width {t.shape[-1]} != hidden_size {self.hidden_size}")
        key_mask = as_bool_mask(refined_mask, refined_states)  # [B, N]
        out_mask = as_bool_mask(guide_mask, guide_states)  # [B, M]

        q = self._split_heads(self.w_q(guide_states))  # [B, h, M, d_h]
        k = self._split_heads(self.w_k(refined_states))  # [B, h, N, d_h]
        v = self._split_heads(self.w_v(refined_states))  # [B, h, N, d_h]

        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)  # [B, h, M, N]
        keep = key_mask[:, None, None, :]
        # A finite minimum (not -inf) keeps all-padding rows NaN-free; the multiplication by
        # ``keep`` below then zeroes them. For rows with >= 1 real key, exp(min - max) == 0.
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
        probs = F.softmax(scores, dim=-1) * keep
        probs = self.attn_dropout(probs)
        heads = torch.matmul(probs, v)  # [B, h, M, d_h]

        b, _, m, _ = heads.shape
        h_prime = self.w_o(heads.transpose(1, 2).reshape(b, m, self.hidden_size))  # eq. 3
        out = self.layer_norm(h_prime + self.ffn(h_prime))  # eq. 4
        out = out * out_mask.unsqueeze(-1).to(out.dtype)
        return out, out_mask
