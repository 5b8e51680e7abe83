"""The distilled dual encoder: the dual encoder's towers (:mod:`.dual_encoder`) trained with
the in-batch softmax and a distillation term towards a cross-encoder teacher's scores over
each question's first-stage list (:mod:`retrieval_qa.losses.distillation`).

A training batch (:class:`~retrieval_qa.distill.datamodule.DistillDataModule`) holds ``B``
gold pairs, each question's list negatives, the list mask and the teacher's scores. The
student's score of list entry ``j`` of question ``b`` is the in-batch loss's scaled
similarity (``scale * cos`` under the CPU profile) of the question with the gold sentence
(``j = 0``) or with its ``j``-th negative. The loss::

    in_batch_weight * in-batch softmax(q, gold sentences) + weight * distillation(list scores)

(plus the pooler's penalty of the gold pairs, for a pooler that has one).

With ``shared_negatives``, the in-batch softmax's candidates are the gold sentences and the
batch's list negatives that the data module marks ``shared`` (not a gold sentence of the
batch, not scored by the teacher above their own question's gold): every question of the
batch then contrasts its gold sentence with every other question's hard negatives as well
(the cross-batch hard negatives of RocketQA, denoised by the teacher), at no extra encoding.

Export, evaluation and inference are the dual encoder's: the export is a
``DualEncoderInference`` folder (a pipeline stage's ``checkpoint:``, ``rqa evaluate
--checkpoint``, ``rqa export --format sentence-transformers --checkpoint``).
"""

from __future__ import annotations

import torch

from ..losses.distillation import ListDistillationLoss
from .dual_encoder import DualEncoderModule


class DistillDualEncoderModule(DualEncoderModule):
    """The dual encoder's keyword arguments plus ``distillation`` (``loss``: kl |
    margin_mse, ``weight``, ``in_batch_weight``, ``student_temperature``,
    ``teacher_temperature``, ``shared_negatives``; conf/model/distill.yaml).

    Args:
        towers: the ``model.towers`` block (the student dual encoder).
        loss: the in-batch softmax's ``model.loss`` block.
        optimizer: the ``model.optimizer`` block.
        gradient_cache: must hold ``mini_batch_size: null``.
        evaluation: the ``eval`` group's settings.
        distillation: the ``model.distillation`` block (above).

    It trains on batches of :class:`~retrieval_qa.distill.datamodule.DistillDataModule`
    (each question's list and the teacher's scores).

    Example:

        >>> from retrieval_qa.registry import config_values, instantiate
        >>> from retrieval_qa.config import compose_group
        >>> tiny = {"towers": {"encoder": {"type": "gru", "vocab_size": 50,
        ...                                 "embedding_dim": 8, "hidden_size": 8},
        ...                     "pooler": {"type": "mean"}}}
        >>> model = compose_group("model", "distill", tiny)  # conf/model/distill.yaml
        >>> evaluation = config_values(compose_group("eval", "default"))
        >>> module = instantiate(model, "model", evaluation=evaluation)
        >>> type(module).__name__, module.distill_loss.kind
        ('DistillDualEncoderModule', 'kl')
    """

    def __init__(self, towers: dict, loss: dict, optimizer: dict, *, gradient_cache: dict,
                 evaluation: dict, distillation: dict) -> None:
        if (gradient_cache or {}).get("mini_batch_size") is not None:
            raise ValueError("model.gradient_cache.mini_batch_size must be null for "
                             "distillation (the list scores are not gradient-cached)")
        super().__init__(towers, loss, optimizer, gradient_cache=gradient_cache,
                         evaluation=evaluation)
        self.distill_loss = ListDistillationLoss(
            kind=distillation["loss"], student_temperature=distillation["student_temperature"],
            teacher_temperature=distillation["teacher_temperature"])
        self.distill_weight = float(distillation["weight"])
        self.in_batch_weight = float(distillation["in_batch_weight"])
        self.shared_negatives = bool(distillation["shared_negatives"])

    def list_scores(self, q: torch.Tensor, a: torch.Tensor, negatives: torch.Tensor | None,
                    mask: torch.Tensor) -> torch.Tensor:
        """``[B, L]`` student scores of each question's list: column 0 with its gold sentence
        ``a``, then with its negatives (``negatives``: the existing entries of ``mask[:, 1:]``
        in row-major order); 0 where an entry does not exist."""
        qs, gold = self.loss.score_space(q), self.loss.score_space(a)
        rest = torch.zeros(mask.shape[0], mask.shape[1] - 1, device=qs.device, dtype=qs.dtype)
        if negatives is not None:
            owner = mask[:, 1:].nonzero()[:, 0]  # the question of each negative, row-major
            rest = rest.masked_scatter(mask[:, 1:],
                                       (qs[owner] * self.loss.score_space(negatives)).sum(-1))
        return torch.cat([(qs * gold).sum(-1, keepdim=True), rest], dim=1)

    def training_step(self, batch, batch_idx):
        q, a, penalty = self.towers.encode_pair(batch["question"], batch["answer"])
        negatives = batch.get("negatives")
        n = self.towers.encode_answer(**negatives) if negatives is not None else None
        candidates = a
        if self.shared_negatives and n is not None:
            candidates = torch.cat([a, n[batch["shared"]]])
        in_batch = self.loss(q, candidates)
        student = self.list_scores(q, a, n, batch["list_mask"])
        distill = self.distill_loss(student, batch["teacher"], batch["list_mask"])
        logs = {"train/in_batch_loss": in_batch, "train/distill_loss": distill}
        loss = self.add_penalty(self.in_batch_weight * in_batch + self.distill_weight * distill,
                                penalty, logs)
        return self.log_training(loss, logs, batch_idx, q.shape[0])
