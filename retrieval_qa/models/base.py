"""What every retrieval LightningModule shares: evaluation of a pool inside Lightning's
validation / test loops with the shared torchmetrics, optimiser set-up, a fail-fast check for
non-finite losses, and export of the towers as the inference model."""

from __future__ import annotations

import pytorch_lightning as pl
import torch
import torch.nn.functional as F

from ..data.types import RetrievalPool
from ..encoders import DualTowers
from ..evaluation import ReQARankMetric
from ..evaluation.evaluator import gold_mask
from .optim import build_optimizer, build_schedule


class NonFiniteLossError(FloatingPointError):
    pass


class RetrievalModule(pl.LightningModule):
    """Subclasses build ``self.towers`` (a :class:`DualTowers`) and implement
    ``training_step``. Evaluation batches come from the data module's loaders:
    dataloader 0 = candidates (answer side), 1 = questions, each with an ``index`` into the
    pool, so shards from every process can be reassembled."""

    towers: DualTowers

    def __init__(self, optimizer: dict, similarity: str, eval_chunk: int = 1024) -> None:
        super().__init__()
        self.optimizer_cfg = dict(optimizer)
        self.similarity = similarity
        self.eval_chunk = eval_chunk
        self.val_metric = ReQARankMetric()
        self.test_metric = ReQARankMetric()
        self._eval_buffers: dict[str, list] = {"answer": [], "question": []}

    # ---- training helpers -------------------------------------------------------------
    def check_finite(self, loss: torch.Tensor, batch_idx: int) -> None:
        if not torch.isfinite(loss):
            raise NonFiniteLossError(
                f"non-finite training loss ({loss.item()}) at global step {self.global_step} "
                f"(epoch {self.current_epoch}, batch {batch_idx}); try a lower learning rate, "
                "precision=32 or trainer.gradient_clip_val")

    def configure_optimizers(self):
        optimizer = build_optimizer(self.parameters(), self.optimizer_cfg)
        schedule = build_schedule(optimizer, self.optimizer_cfg,
                                  self.trainer.estimated_stepping_batches)
        return {"optimizer": optimizer,
                "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    # ---- evaluation inside Lightning ----------------------------------------------------
    def _eval_step(self, batch: dict, dataloader_idx: int) -> None:
        side = "answer" if dataloader_idx == 0 else "question"
        inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")
                  if k in batch}
        fn = self.towers.encode_answer if side == "answer" else self.towers.encode_question
        emb = fn(**inputs).float()
        if self.similarity == "cosine":
            emb = F.normalize(emb, dim=-1)
        self._eval_buffers[side].append((batch["index"], emb))

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        self._eval_step(batch, dataloader_idx)

    def test_step(self, batch, batch_idx, dataloader_idx=0):
        self._eval_step(batch, dataloader_idx)

    def _local(self, side: str) -> tuple[torch.Tensor, torch.Tensor]:
        """This process's (indices, embeddings) of one side; empties the buffer."""
        parts, self._eval_buffers[side] = self._eval_buffers[side], []
        if not parts:
            return (torch.empty(0, dtype=torch.long, device=self.device),
                    torch.empty(0, self.towers.output_dim, device=self.device))
        return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])

    def _gather_all(self, side: str) -> tuple[torch.Tensor, torch.Tensor]:
        idx, emb = self._local(side)
        if self.trainer.world_size == 1:
            return idx, emb
        # uneven shards: pad to the largest, gather, then drop the padding
        size = torch.tensor([len(idx)], device=self.device)
        sizes = self.all_gather(size).view(-1).tolist()
        longest = max(sizes)
        pad = longest - len(idx)
        idx = F.pad(idx, (0, pad), value=-1)
        emb = F.pad(emb, (0, 0, 0, pad))
        all_idx = self.all_gather(idx).reshape(-1)
        all_emb = self.all_gather(emb).reshape(-1, emb.shape[-1])
        keep = all_idx >= 0
        return all_idx[keep], all_emb[keep]

    def _score_pool(self, stage: str, pool: RetrievalPool, metric: ReQARankMetric) -> dict:
        c_idx, c_emb = self._gather_all("answer")
        q_idx, q_emb = self._local("question")  # each process scores its own questions
        candidates = torch.zeros(len(pool.candidates), c_emb.shape[-1], device=c_emb.device)
        candidates[c_idx] = c_emb
        for lo in range(0, len(q_idx), self.eval_chunk):
            rows = q_idx[lo:lo + self.eval_chunk]
            scores = q_emb[lo:lo + self.eval_chunk] @ candidates.T
            metric.update(scores, gold_mask(pool.gold, rows.tolist(), len(pool.candidates)).to(
                scores.device), rows)
        result = metric.compute()
        metric.reset()
        self.log_dict({f"{stage}/{k}": v for k, v in result.items()
                       if k in ("mrr", "r@1", "r@5", "r@10")}, sync_dist=False,
                      prog_bar=stage == "val", rank_zero_only=False)
        return {k: float(v) for k, v in result.items()}

    def on_validation_epoch_end(self) -> None:
        if self.trainer.sanity_checking:
            self._eval_buffers = {"answer": [], "question": []}
            return
        self._score_pool("val", self.trainer.datamodule.val_pool, self.val_metric)

    def on_test_epoch_end(self) -> None:
        self.test_results = self._score_pool("test", self.trainer.datamodule.test_pool,
                                             self.test_metric)

