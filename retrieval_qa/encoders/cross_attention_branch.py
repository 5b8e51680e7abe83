"""ENDX's cross-attention branch (the paper's "Cross-Encoders", section 3.3, Fig. 1, red branch).

A training-only branch of ENDX, not a cross-encoder in the usual sense (one network scoring a
concatenated pair; that is :mod:`retrieval_qa.classifiers.pair_classifier`): each text is encoded
on its own, then refined by cross attention to its matched partner, and the pooled
cross-embeddings teach the dual towers through GAM. It is never used at inference.

:class:`CrossAttentionBranch` turns a batch of *matched* question-answer pairs into the
cross-embeddings ``R^cross_q`` and ``R^cross_a`` used by the cross retrieval loss (eq. 5) and
by the Geometry Alignment Mechanism (:mod:`retrieval_qa.losses.gam`):

1. ``H_q = Encoder_cross(q)`` ``[B, N, d_r]``, ``H_a = Encoder_cross(a)`` ``[B, M, d_r]``;
2. ``H^cross_q = CrossAttn_q(refined=H_q, guide=H_a)`` ``[B, M, d_r]`` (rows follow the answer,
   masked by the answer mask) and ``H^cross_a = CrossAttn_a(refined=H_a, guide=H_q)``
   ``[B, N, d_r]`` (masked by the question mask), see
   :class:`~retrieval_qa.encoders.cross_attention.CrossAttentionBlock`;
3. ``R^cross_q = Pool(H^cross_q, answer_mask)``, ``R^cross_a = Pool(H^cross_a, question_mask)``.

The token encoder and pooler are injected (any modules following the project interface:
token encoder ``forward(input_ids, attention_mask, token_type_ids=None) -> [B, L, H]`` with
``hidden_size``; pooler ``forward(states, attention_mask) -> [B, D]`` with ``output_dim``).

Weight sharing not fixed by the paper, all constructor options:

* ``share``: one block serves both directions, or separate blocks for "question refined by
  answer" and "answer refined by question". The paper's notation (eq. 2 shown "for
  instance" for the question, "similarly" for the answer) does not say; conf/model/endx.yaml
  keeps separate blocks because the two directions attend in opposite roles.
* ``answer_token_encoder`` / ``answer_pooler`` (default None = share the question-side
  module): Fig. 1 draws a single ``Encoder_cross`` and aggregator for both texts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from retrieval_qa.config import plain
from retrieval_qa.encoders.cross_attention import CrossAttentionBlock
from retrieval_qa.encoders.dual_towers import PairEncoding
from retrieval_qa.registry import require_keys

__all__ = ["CROSS_BRANCH_SECTIONS", "CrossAttentionBranch", "build_cross_attention_branch"]


class CrossAttentionBranch(nn.Module):
    """Encoder_cross + two-way cross attention + aggregation -> (R^cross_q, R^cross_a).

    Args:
        token_encoder: cross-side token encoder (for questions; also answers unless
            ``answer_token_encoder`` is given). Must expose ``hidden_size``.
        pooler: aggregator (for the refined question; also the refined answer unless
            ``answer_pooler`` is given). Must expose ``output_dim``.
        num_heads: cross attention heads (paper: 12).
        ffn_dim: FFN inner width of the cross attention blocks (None: ``4 * hidden_size``).
        dropout: dropout inside the cross attention blocks.
        share: one block for both directions (True) or one per direction (False).
        activation: FFN activation of the cross attention blocks ("relu" or "gelu").
        answer_token_encoder: optional separate token encoder for answers.
        answer_pooler: optional separate pooler for the refined answers.

    The settings are the keys of ``model.cross.cross_attention`` (conf/model/endx.yaml).

    Example::

        branch = CrossAttentionBranch(token_encoder, pooler, num_heads=12, ffn_dim=None,
                                      dropout=0.1, share=False, activation="relu")
        cross_q, cross_a = branch(question_batch, answer_batch)
    """

    def __init__(
        self,
        token_encoder: nn.Module,
        pooler: nn.Module,
        *,
        num_heads: int,
        ffn_dim: int | None,
        dropout: float,
        share: bool,
        activation: str,
        answer_token_encoder: nn.Module | None = None,
        answer_pooler: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.token_encoder = token_encoder
        self.answer_token_encoder = answer_token_encoder
        self.pooler = pooler
        self.answer_pooler = answer_pooler
        hidden_size = int(token_encoder.hidden_size)
        if answer_token_encoder is not None and int(answer_token_encoder.hidden_size) != hidden_size:
            raise ValueError(
                f"answer_token_encoder.hidden_size ({answer_token_encoder.hidden_size}) != "
                f"token_encoder.hidden_size ({hidden_size})"
            )
        self.hidden_size = hidden_size
        self.output_dim = int(pooler.output_dim)
        if answer_pooler is not None and int(answer_pooler.output_dim) != self.output_dim:
            raise ValueError(
                f"answer_pooler.output_dim ({answer_pooler.output_dim}) != "
                f"pooler.output_dim ({self.output_dim}); R^cross_q . R^cross_a needs equal widths"
            )
        self.share_cross_attention = share

        def block() -> CrossAttentionBlock:
            return CrossAttentionBlock(
                hidden_size, num_heads=num_heads, ffn_dim=ffn_dim, dropout=dropout,
                activation=activation,
            )

        # cross_attn_q: refines the question, guided by the answer (output rows = answer tokens).
        self.cross_attn_q = block()
        # cross_attn_a: refines the answer, guided by the question (output rows = question tokens).
        self.cross_attn_a = self.cross_attn_q if share else block()

    @staticmethod
    def _unpack(batch: Mapping[str, Any], name: str) -> tuple[torch.Tensor, torch.Tensor | None, Any]:
        if "input_ids" not in batch:
            raise KeyError(f"{name} batch has no 'input_ids' (keys: {sorted(batch)})")
        return batch["input_ids"], batch.get("attention_mask"), batch.get("token_type_ids")

    def encode_tokens(
        self, q_batch: Mapping[str, Any], a_batch: Mapping[str, Any]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Encoder_cross on both texts: ``(H_q [B,N,H], q_mask, H_a [B,M,H], a_mask)``.

        A missing ``attention_mask`` means no padding (all ones).
        """
        q_ids, q_mask, q_tt = self._unpack(q_batch, "question")
        a_ids, a_mask, a_tt = self._unpack(a_batch, "answer")
        if q_ids.shape[0] != a_ids.shape[0]:
            raise ValueError(
                f"CrossAttentionBranch needs matched pairs: question batch has {q_ids.shape[0]} rows, "
                f"answer batch has {a_ids.shape[0]}"
            )
        if q_mask is None:
            q_mask = torch.ones_like(q_ids)
        if a_mask is None:
            a_mask = torch.ones_like(a_ids)
        a_encoder = self.token_encoder if self.answer_token_encoder is None else self.answer_token_encoder
        h_q = self.token_encoder(q_ids, q_mask, token_type_ids=q_tt)
        h_a = a_encoder(a_ids, a_mask, token_type_ids=a_tt)
        return h_q, q_mask, h_a, a_mask

    def forward(
        self, q_batch: Mapping[str, Any], a_batch: Mapping[str, Any]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-embeddings of matched pairs (row ``i`` of ``q_batch`` with row ``i`` of ``a_batch``).

        Args:
            q_batch: ``input_ids [B, N]``, ``attention_mask [B, N]``, optional ``token_type_ids``.
            a_batch: ``input_ids [B, M]``, ``attention_mask [B, M]``, optional ``token_type_ids``.

        Returns:
            ``(r_q_cross [B, D], r_a_cross [B, D])`` with ``D = output_dim``.
        """
        r_q, r_a, _ = self.encode_pair(q_batch, a_batch)
        return r_q, r_a

    def encode_pair(self, q_batch: Mapping[str, Any], a_batch: Mapping[str, Any]
                    ) -> PairEncoding:
        """:meth:`forward` with the sum of the two poolers' penalties (question side + answer
        side, each pooled batch its own term, as :meth:`DualTowers.encode_pair`)."""
        h_q, q_mask, h_a, a_mask = self.encode_tokens(q_batch, a_batch)
        # Question refined by answer: [B, M, H], masked by the answer mask.
        h_q_cross, h_q_cross_mask = self.cross_attn_q(h_q, q_mask, h_a, a_mask)
        # Answer refined by question: [B, N, H], masked by the question mask.
        h_a_cross, h_a_cross_mask = self.cross_attn_a(h_a, a_mask, h_q, q_mask)
        r_q, q_pen = self.pooler.pool(h_q_cross, h_q_cross_mask)
        a_pooler = self.pooler if self.answer_pooler is None else self.answer_pooler
        r_a, a_pen = a_pooler.pool(h_a_cross, h_a_cross_mask)
        return PairEncoding(r_q, r_a, q_pen.to(r_q.device) + a_pen.to(r_q.device))


#: The sections of the branch's config (``model.cross`` of conf/model/endx.yaml).
CROSS_BRANCH_SECTIONS = ("encoder", "pooler", "cross_attention")
#: The keys of ``cross.cross_attention``: the branch's keyword arguments.
CROSS_ATTENTION_KEYS = ("num_heads", "ffn_dim", "dropout", "share", "activation")


def build_cross_attention_branch(
    cfg: Any, *, token_encoder: nn.Module | None = None
) -> CrossAttentionBranch:
    """A :class:`CrossAttentionBranch` from the ``cross`` block (dict or OmegaConf) of a
    composed config: ``encoder`` and ``pooler`` (the blocks of
    :mod:`retrieval_qa.encoders.builders`; conf/model/endx.yaml: the towers'), and
    ``cross_attention``, the branch's keyword arguments (num_heads, ffn_dim: null for
    4 * hidden_size, dropout, activation: relu | gelu, share: one block, both ways); a missing
    or unknown key is an error naming it. The pooler is built over the token encoder's
    ``hidden_size`` and shared by the question and answer sides.

    Args:
        cfg: the ``model.cross`` block (conf/model/endx.yaml), sections
            :data:`CROSS_BRANCH_SECTIONS`.
        token_encoder: an already built Encoder_cross to use instead of building one from
            ``encoder`` (e.g. to load a checkpoint once); None: build it.
    """
    from retrieval_qa.encoders.builders import build_pooler, build_token_encoder

    full = plain(cfg)
    unknown = sorted(set(full) - set(CROSS_BRANCH_SECTIONS))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in the cross-attention branch config; "
                         f"allowed: {list(CROSS_BRANCH_SECTIONS)}")
    require_keys(full, CROSS_BRANCH_SECTIONS, "cross")
    xattn = plain(full["cross_attention"])
    require_keys(xattn, CROSS_ATTENTION_KEYS, "cross.cross_attention")
    unknown = sorted(set(xattn) - set(CROSS_ATTENTION_KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in cross.cross_attention")
    encoder = token_encoder if token_encoder is not None else build_token_encoder(full["encoder"])
    pooler = build_pooler(full["pooler"], int(encoder.hidden_size))
    return CrossAttentionBranch(
        encoder,
        pooler,
        num_heads=int(xattn["num_heads"]),
        ffn_dim=None if xattn["ffn_dim"] is None else int(xattn["ffn_dim"]),
        dropout=float(xattn["dropout"]),
        share=bool(xattn["share"]),
        activation=str(xattn["activation"]),
    )
