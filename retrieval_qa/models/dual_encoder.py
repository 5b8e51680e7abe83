"""The dual encoder (ENDX section 3.2; SDE/ADE variants; supervised-mining section 4.2):
two towers trained with the in-batch softmax."""

from __future__ import annotations

from ..encoders import build_dual_towers
from ..losses import InBatchSoftmaxLoss
from .base import RetrievalModule


class DualEncoderModule(RetrievalModule):
    """``model`` config: ``towers`` (see retrieval_qa.encoders.builders), ``loss``
    (similarity, scale, symmetric, gather_across_processes, penalty_coef for the multi-hop
    attention penalty of Lin et al.), ``optimizer``; ``evaluation``: the ``eval`` group."""

    def __init__(self, towers: dict, loss: dict, optimizer: dict,
                 evaluation: dict | None = None) -> None:
        super().__init__(optimizer, loss["similarity"], evaluation)
        self.save_hyperparameters()
        self.towers = build_dual_towers(towers)
        self.loss = InBatchSoftmaxLoss(loss["similarity"], loss["scale"], loss["symmetric"],
                                       loss["gather_across_processes"])
        self.penalty_coef = float(loss["penalty_coef"])
        self.train()  # from_pretrained leaves Hugging Face models in eval mode (no dropout)

    def training_step(self, batch, batch_idx):
        q, a, penalty = self.towers.encode_pair(batch["question"], batch["answer"])
        loss = self.loss(q, a, batch.get("weight"))
        logs = {"train/retrieval_loss": loss}
        if self.penalty_coef:
            loss = loss + self.penalty_coef * penalty
            logs["train/attention_penalty"] = penalty
        self.check_finite(loss, batch_idx)
        logs["train/loss"] = loss
        self.log_dict(logs, prog_bar=False, batch_size=q.shape[0])
        self.log("loss", loss, prog_bar=True, logger=False, batch_size=q.shape[0])
        return loss
