"""Question and answer towers with the parameter sharing of the SDE/ADE paper."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import torch
from torch import nn

from .tower import Tower

SHARING_MODES = {
    "sde": "Siamese: one tower object encodes both sides (all parameters shared)",
    "ade": "asymmetric: two fully separate towers",
    "ade_ste": "asymmetric, the two towers share one token embedder (the same module)",
    "ade_fte": "asymmetric, both token embedders frozen (requires_grad False)",
    "ade_spl": "asymmetric, the two towers share one projection layer",
}


class PairEncoding(NamedTuple):
    """A training batch through both towers: the embeddings and the poolers' regulariser
    (question batch + answer batch; 0 for poolers without one)."""

    question: torch.Tensor
    answer: torch.Tensor
    penalty: torch.Tensor


def check_sharing(sharing: str) -> str:
    """Return ``sharing`` unchanged; raise ``ValueError`` unless it is a key of
    :data:`SHARING_MODES`.

    Args:
        sharing: the towers' sharing mode (``model.sharing``, e.g. conf/model/dual_encoder.yaml).
    """
    if sharing not in SHARING_MODES:
        raise ValueError(f"sharing={sharing!r}; expected one of {list(SHARING_MODES)}")
    return sharing


def count_trainable(module: nn.Module) -> int:
    """The number of elements of ``module``'s parameters with ``requires_grad``.

    Args:
        module: any module (a shared parameter counts once).

    Example:

        >>> from torch import nn
        >>> count_trainable(nn.Linear(3, 2))
        8
    """
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


class DualTowers(nn.Module):
    """Two towers that map questions and answers to vectors of the same size.

    Args:
        question_tower: the question side's :class:`Tower`.
        answer_tower: the answer side's :class:`Tower`; None (or the question tower) with
            ``sde``.
        sharing: one of ``SHARING_MODES``.

    The sharing is applied here, so the object always holds what its name says:

    - ``sde``: the answer tower must be None or the question tower itself; one object serves
      both sides. With input-type embeddings (``Tower.input_types``) the answer tower is the
      question tower's ``for_side(1)``: the same modules, the answer's type vector.
    - ``ade``: two distinct tower objects, nothing shared.
    - ``ade_ste``: the answer tower's token embedder is replaced by the question tower's
      (the same module, hence the same ``nn.Embedding``).
    - ``ade_fte``: both token embedders are frozen (for pretrained encoders: the word,
      position and token-type tables).
    - ``ade_spl``: the answer tower's projection is replaced by the question tower's; the
      question tower must have one.

    ``forward(q_batch, a_batch) -> (q_emb[B, D], a_emb[B', D])``, each batch a mapping with
    ``input_ids[B, L]``, ``attention_mask[B, L]`` and optionally ``token_type_ids[B, L]``;
    ``encode_pair`` returns the poolers' penalty with them (:class:`PairEncoding`).

    Example:

        >>> import copy
        >>> import torch
        >>> from retrieval_qa.encoders import MeanPooler, RecurrentTokenEncoder, TokenEmbedder
        >>> from retrieval_qa.encoders import Tower
        >>> encoder = RecurrentTokenEncoder(TokenEmbedder(100, 16, padding_idx=0), kind="gru",
        ...                                 hidden_size=8, num_layers=1, bidirectional=True,
        ...                                 dropout=0.0)
        >>> question = Tower(encoder, MeanPooler(8), normalize=False, chunk_rows=None)
        >>> dual = DualTowers(question, copy.deepcopy(question), sharing="ade_ste")
        >>> dual.answer_tower.token_embedder is dual.question_tower.token_embedder
        True
        >>> batch = {"input_ids": torch.randint(1, 100, (2, 5)),
        ...          "attention_mask": torch.ones(2, 5)}
        >>> q, a = dual(batch, batch)
        >>> q.shape, a.shape
        (torch.Size([2, 8]), torch.Size([2, 8]))
    """

    def __init__(self, question_tower: Tower, answer_tower: Tower | None = None, *,
                 sharing: str) -> None:
        super().__init__()
        self.sharing = check_sharing(sharing)
        if sharing == "sde":
            if answer_tower is not None and not question_tower.shares_modules_with(answer_tower):
                raise ValueError(
                    "sharing='sde' uses one tower for both sides: pass answer_tower=None or "
                    "the question tower itself"
                )
            if answer_tower is None:
                answer_tower = (question_tower if question_tower.input_types is None
                                else question_tower.for_side(1))
        else:
            if question_tower.input_types is not None or (
                    answer_tower is not None and answer_tower.input_types is not None):
                raise ValueError(
                    f"sharing={sharing!r} with input-type embeddings: they mark the side for "
                    "one shared tower (sharing='sde'); set encoder.input_types: false")
            if answer_tower is None or answer_tower is question_tower:
                raise ValueError(f"sharing={sharing!r} needs two distinct tower objects")
            if sharing == "ade_ste":
                answer_tower.token_encoder.set_token_embedder(question_tower.token_embedder)
            elif sharing == "ade_fte":
                question_tower.token_encoder.freeze_token_embedder()
                answer_tower.token_encoder.freeze_token_embedder()
            elif sharing == "ade_spl":
                if question_tower.projection is None:
                    raise ValueError(
                        "sharing='ade_spl' shares the projection layer, but the question tower "
                        "has none (set projection.dim, or let build_dual_towers add one)"
                    )
                answer_tower.projection = question_tower.projection
        if question_tower.output_dim != answer_tower.output_dim:
            raise ValueError(
                f"towers disagree on the embedding size: question {question_tower.output_dim}, "
                f"answer {answer_tower.output_dim}"
            )
        self.question_tower = question_tower
        self.answer_tower = answer_tower

    @property
    def output_dim(self) -> int:
        return self.question_tower.output_dim

    def encode_question(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                        token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """``[B, L]`` ids and mask -> ``[B, D]`` question embeddings."""
        return self.question_tower(input_ids, attention_mask, token_type_ids)

    def encode_answer(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                      token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """``[B, L]`` ids and mask -> ``[B, D]`` answer embeddings."""
        return self.answer_tower(input_ids, attention_mask, token_type_ids)

    def encode_pair(self, q_batch: Mapping[str, torch.Tensor],
                    a_batch: Mapping[str, torch.Tensor]) -> PairEncoding:
        """Both sides of a training batch and the sum of their pooler penalties (each a batch
        mean; correct for SDE too, where one pooler runs twice). Add ``coef * penalty`` to the
        loss."""
        q, q_pen = self.question_tower.encode(
            q_batch["input_ids"], q_batch["attention_mask"], q_batch.get("token_type_ids"))
        a, a_pen = self.answer_tower.encode(
            a_batch["input_ids"], a_batch["attention_mask"], a_batch.get("token_type_ids"))
        return PairEncoding(q, a, q_pen.to(q.device) + a_pen.to(q.device))

    def forward(self, q_batch: Mapping[str, torch.Tensor], a_batch: Mapping[str, torch.Tensor]
                ) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.encode_pair(q_batch, a_batch)
        return out.question, out.answer

    def trainable_parameters(self) -> dict[str, int]:
        """Trainable parameter counts: ``question`` and ``answer`` per tower (a shared module
        counts in both), and ``total`` for the model, each shared parameter counted once."""
        return {
            "question": count_trainable(self.question_tower),
            "answer": count_trainable(self.answer_tower),
            "total": count_trainable(self),
        }
