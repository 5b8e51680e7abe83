"""The dual encoder (ENDX section 3.2; SDE/ADE variants; supervised-mining section 4.2):
two towers trained with the in-batch softmax."""

from __future__ import annotations

from ..encoders import build_dual_towers
from ..losses import InBatchSoftmaxLoss
from .base import RetrievalModule
from .grad_cache import grad_cache_step


class DualEncoderModule(RetrievalModule):
    """``model`` config: ``towers`` (see retrieval_qa.encoders.builders), ``loss``
    (similarity, scale, symmetric, gather_across_processes, penalty_coef for the multi-hop
    attention penalty of Lin et al.), ``optimizer``, ``gradient_cache`` (``mini_batch_size``:
    null for the plain step, else GradCache over mini-batches of that size, see
    :mod:`.grad_cache`; Lightning's manual optimisation then steps the optimiser, so
    ``trainer.gradient_clip_val`` and ``accumulate_grad_batches`` are not available);
    ``evaluation``: the ``eval`` group.

    Args:
        towers: the ``model.towers`` block (:func:`~retrieval_qa.encoders.build_dual_towers`).
        loss: the ``model.loss`` block (:class:`~retrieval_qa.losses.InBatchSoftmaxLoss`'s
            settings and ``penalty_coef``).
        optimizer: the ``model.optimizer`` block.
        gradient_cache: the ``model.gradient_cache`` block; a ``mini_batch_size`` of None
            (or an empty block) is the plain step.
        evaluation: the ``eval`` group's settings (``top_k``, ``memory_mb``, ``ks``,
            ``doc_level``).

    ``rqa train`` builds it from the composed config (``_target_`` of conf/model/
    dual_encoder.yaml); :meth:`build` also makes its tokenizer and data module.

    Example:

        >>> from retrieval_qa.registry import config_values, instantiate
        >>> from retrieval_qa.config import compose_group
        >>> tiny = {"towers": {"encoder": {"type": "gru", "vocab_size": 50,
        ...                                 "embedding_dim": 8, "hidden_size": 8},
        ...                     "pooler": {"type": "mean"}}}
        >>> model = compose_group("model", "dual_encoder", tiny)  # conf/model/dual_encoder.yaml
        >>> evaluation = config_values(compose_group("eval", "default"))
        >>> module = instantiate(model, "model", evaluation=evaluation)
        >>> type(module).__name__, module.towers.output_dim, module.loss.similarity
        ('DualEncoderModule', 8, 'dot')
    """

    def __init__(self, towers: dict, loss: dict, optimizer: dict, *, gradient_cache: dict,
                 evaluation: dict) -> None:
        super().__init__(optimizer, loss["similarity"], evaluation)
        self.save_hyperparameters()
        self.cache_size = (gradient_cache or {}).get("mini_batch_size")
        self.automatic_optimization = self.cache_size is None
        self.towers = build_dual_towers(towers)
        self.loss = InBatchSoftmaxLoss.from_config(loss)
        self.penalty_coef = float(loss["penalty_coef"])
        self.train()  # from_pretrained leaves Hugging Face models in eval mode (no dropout)

    def training_step(self, batch, batch_idx):
        if self.cache_size is not None:
            return self._cached_training_step(batch, batch_idx)
        q, a, penalty = self.towers.encode_pair(batch["question"], batch["answer"])
        loss = self.loss(q, a, batch.get("weight"))
        return self._log_step(loss, penalty, batch_idx, q.shape[0])

    def _log_step(self, retrieval_loss, penalty, batch_idx: int, size: int):
        logs = {"train/retrieval_loss": retrieval_loss}
        loss = self.add_penalty(retrieval_loss, penalty, logs)
        return self.log_training(loss, logs, batch_idx, size)

    def _cached_training_step(self, batch, batch_idx):
        """The same update as the plain step, by gradient caching (manual optimisation)."""
        optimizer, schedule = self.optimizers(), self.lr_schedulers()
        optimizer.zero_grad()
        weight = batch.get("weight")
        loss, penalty = grad_cache_step(
            self.towers.question_tower.encode, self.towers.answer_tower.encode,
            batch["question"], batch["answer"], lambda q, a: self.loss(q, a, weight),
            self.cache_size, self.manual_backward, self.penalty_coef)
        total = self._log_step(loss, penalty, batch_idx, batch["index"].shape[0])
        optimizer.step()
        schedule.step()
        return total
