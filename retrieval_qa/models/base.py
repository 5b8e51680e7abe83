"""What every two-tower retrieval LightningModule shares: the method contract of
:mod:`.method` (build from config, export, describe), evaluation of a pool inside
Lightning's validation / test loops through the shared evaluator core
(:func:`~..evaluation.evaluator.rank_questions`, settings from ``conf/eval``), optimiser
set-up and a fail-fast check for non-finite losses."""

from __future__ import annotations

from pathlib import Path

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from omegaconf import DictConfig, OmegaConf

from ..errors import NonFiniteLossError
from ..evaluation import DenseScorer, ReQARankMetric
from ..evaluation.evaluator import evaluator_settings, rank_questions
from ..evaluation.ranking import aggregate_min
from ..losses.similarity import check_similarity, retrieval_space
from ..registry import config_values, instantiate
from .method import Built, encoder_settings, set_vocab_size
from .optim import lightning_optimizers


class RetrievalModule(pl.LightningModule):
    """Subclasses build ``self.towers`` (``encode_question`` / ``encode_answer`` of token
    batches, ``output_dim``, ``trainable_parameters()``) and implement ``training_step``.

    Evaluation batches come from the data module's loaders: dataloader 0 = candidates
    (answer side, with each candidate's ``doc``), 1 = questions (with their ``gold``
    candidate indices), each with an ``index`` into the pool, so shards from every process
    are reassembled and the labels need no access to the data module.

    Args:
        optimizer: the ``model.optimizer`` block (:func:`~.optim.build_optimizer`'s keys).
        similarity: ``"dot"`` or ``"cosine"``, what retrieval ranks by (the loss's).
        evaluation: the ``eval`` group's settings (conf/eval/default.yaml), checked by
            :func:`~..evaluation.evaluator.evaluator_settings`.
    """

    towers: torch.nn.Module
    #: dotted path of the function that rebuilds the towers from ``towers_config()``
    towers_builder = "retrieval_qa.encoders.build_dual_towers"

    def __init__(self, optimizer: dict, similarity: str, evaluation: dict) -> None:
        super().__init__()
        self.optimizer_cfg = dict(optimizer)
        self.similarity = check_similarity(similarity)
        self.evaluation = evaluator_settings(evaluation)
        self.val_metric = ReQARankMetric(ks=self.evaluation["ks"])
        self.test_metric = ReQARankMetric(ks=self.evaluation["ks"])
        self._eval_buffers: dict[str, list] = {"answer": [], "question": []}
        self.tokenizer = None
        self.inference_meta: dict = {}
        self.test_results: dict = {}
        self.test_question_ranks = None  # ([Q] ranks, [Q] doc ranks or None) after test

    # ---- the method contract ------------------------------------------------------------
    @classmethod
    def encoder_config(cls, model_cfg: DictConfig) -> DictConfig | None:
        """The token-encoder settings whose tokenizer the data module uses
        (:class:`~.method.EncoderSettings`); None when the model config has none."""
        return OmegaConf.select(model_cfg, "towers.encoder")

    @classmethod
    def build(cls, cfg: DictConfig) -> Built:
        from ..encoders.builders import checkpoint_use
        from ..pretrained import load_tokenizer, resolve_pretrained

        enc = encoder_settings(cfg, cls.encoder_config(cfg.model))
        checkpoint = resolve_pretrained(enc.pretrained, fallback=enc.fallback)
        used = checkpoint_use(enc, checkpoint.label)  # a GRU uses its tokenizer and table only
        tokenizer = load_tokenizer(checkpoint)
        set_vocab_size(enc, tokenizer)  # a random token table: one row per tokenizer id
        data = instantiate(cfg.data, "data", tokenizer=tokenizer)
        module = instantiate(cfg.model, "model", evaluation=config_values(cfg.get("eval", {})))
        module.tokenizer = tokenizer
        module.inference_meta = {
            "max_question_length": cfg.data.max_question_length,
            "max_answer_length": cfg.data.max_answer_length,
            "answer_with_context": cfg.data.answer_with_context,
            "pretrained": used, "experiment": cfg.experiment,
            "profile": cfg.profile}
        return Built(module, data, {"pretrained": used,
                                    "pretrained_substituted": checkpoint.substituted})

    def towers_config(self) -> dict:
        return dict(self.hparams["towers"])

    def export(self, folder: str | Path) -> Path:
        """The towers as the inference artefact (no training-only part)."""
        from .inference import DualEncoderInference

        if self.tokenizer is None:
            raise RuntimeError("export() needs the tokenizer that build() attaches")
        meta = {**self.inference_meta, "builder": self.towers_builder,
                "towers": self.towers_config(), "similarity": self.similarity}
        return DualEncoderInference(self.towers.cpu(), self.tokenizer, meta).save(folder)

    def describe(self) -> dict:
        return {"trainable_parameters": self.towers.trainable_parameters()}

    # ---- training helpers -------------------------------------------------------------
    penalty_coef: float = 0.0  # weight of the poolers' attention penalty (model.loss)

    def epoch_progress(self, batch_idx: int) -> float:
        """Fractional epoch, so schedules (GAM weights, KL annealing) move with every step."""
        per_epoch = max(int(self.trainer.num_training_batches), 1) if self._trainer else 1
        return self.current_epoch + batch_idx / per_epoch

    def add_penalty(self, loss: torch.Tensor, penalty: torch.Tensor, logs: dict) -> torch.Tensor:
        """``loss + penalty_coef * penalty`` (the penalty logged) when the coefficient is set."""
        if not self.penalty_coef:
            return loss
        logs["train/attention_penalty"] = penalty
        return loss + self.penalty_coef * penalty

    def log_training(self, loss: torch.Tensor, logs: dict, batch_idx: int,
                     size: int) -> torch.Tensor:
        """Fail fast on a non-finite loss, log every term and the total, return the loss.

        Nothing here reads a value back to the host at every step (on a GPU such a read
        waits for the step to finish and leaves the card idle): the terms go to the logger
        as device tensors (read at ``trainer.log_every_n_steps``), the progress bar reads
        :attr:`last_loss` at its own refresh, and the finiteness check is batched
        (:meth:`check_finite`)."""
        self.check_finite(loss, batch_idx)
        logs["train/loss"] = loss
        self.log_dict({k: v.detach() if torch.is_tensor(v) else v for k, v in logs.items()},
                      batch_size=size)
        self.last_loss = loss.detach()
        term = logs.get(self.divergence_term)
        self.divergence_loss = (term if torch.is_tensor(term) else loss).detach()
        return loss

    last_loss: torch.Tensor | None = None
    #: the logged term that the divergence check watches (retrieval_qa/training/guards.py):
    #: one that does not grow while training goes well; the total by default
    divergence_term: str = "train/loss"
    divergence_loss: torch.Tensor | None = None  # its value at the last step (on the device)
    _nonfinite: torch.Tensor | None = None   # device flag: a non-finite loss since the last read
    _checked_step = 0                         # the global step of the last read

    def check_finite(self, loss: torch.Tensor, batch_idx: int) -> None:
        """Raise :class:`NonFiniteLossError` on a non-finite loss. On the CPU every step is
        read; on an accelerator a flag accumulates on the device and is read every
        ``trainer.log_every_n_steps`` steps (the error names the steps since the last read),
        so no step waits for the host."""
        bad = ~torch.isfinite(loss.detach())
        self._nonfinite = bad if self._nonfinite is None else self._nonfinite | bad
        every = max(int(self.trainer.log_every_n_steps), 1) if self._trainer else 1
        step = self.global_step
        if loss.device.type != "cpu" and (step + 1) % every:
            return
        flag, self._nonfinite = self._nonfinite, None
        first, self._checked_step = self._checked_step, step + 1
        if bool(flag):
            where = (f"global step {step}" if first >= step
                     else f"one of the global steps {first} to {step}")
            lr = self.optimizer_cfg.get("lr")
            now = f": model.optimizer.lr={float(lr):g} now" if lr is not None else ""
            raise NonFiniteLossError(
                f"non-finite training loss at {where} "
                f"(epoch {self.current_epoch}, batch {batch_idx}); no result was written (fix: "
                f"a lower learning rate{now}; or precision=32, or trainer.gradient_clip_val=1.0; "
                "then resume=never or another output_dir, since this folder holds the failed "
                "run)")

    def configure_optimizers(self):
        return lightning_optimizers(self.parameters(), self.optimizer_cfg,
                                    self.trainer.estimated_stepping_batches)

    # ---- evaluation inside Lightning ----------------------------------------------------
    def encode_side(self, side: str, inputs: dict) -> torch.Tensor:
        fn = self.towers.encode_answer if side == "answer" else self.towers.encode_question
        return fn(**inputs)

    def _eval_step(self, batch: dict, dataloader_idx: int) -> None:
        side = "answer" if dataloader_idx == 0 else "question"
        inputs = {k: v for k, v in batch.items() if k not in ("index", "gold", "doc", "same_as")}
        emb = retrieval_space(self.encode_side(side, inputs).float(), self.similarity)
        label = torch.stack([batch["doc"], batch["same_as"]], 1) if side == "answer" \
            else batch["gold"]
        self._eval_buffers[side].append((batch["index"], emb, label))

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        self._eval_step(batch, dataloader_idx)

    def test_step(self, batch, batch_idx, dataloader_idx=0):
        self._eval_step(batch, dataloader_idx)

    def _local(self, side: str) -> tuple[torch.Tensor, torch.Tensor, list]:
        """This process's (indices, embeddings, labels) of one side; empties the buffer.
        Labels: a [N, 2] LongTensor of (document, first copy) (answers) or a list of gold lists
        (questions)."""
        parts, self._eval_buffers[side] = self._eval_buffers[side], []
        if not parts:
            return (torch.empty(0, dtype=torch.long, device=self.device),
                    torch.empty(0, self.towers.output_dim, device=self.device),
                    torch.empty(0, 2, dtype=torch.long, device=self.device)
                    if side == "answer" else [])
        labels = torch.cat([p[2] for p in parts]) if side == "answer" \
            else [g for p in parts for g in p[2]]
        return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts]), labels

    def _gather_candidates(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every process's candidates as ([C, D] embeddings, [C] documents) in pool order; the
        copies of an encoder input take its first copy's embedding, so that they tie exactly
        however the pool was sharded and batched."""
        idx, emb, labels = self._local("answer")
        if self.trainer.world_size > 1:
            # uneven shards: pad to the largest, gather, then drop the padding
            sizes = self.all_gather(torch.tensor([len(idx)], device=self.device)).view(-1)
            pad = int(sizes.max()) - len(idx)
            idx, labels = F.pad(idx, (0, pad), value=-1), F.pad(labels, (0, 0, 0, pad), value=-1)
            emb = F.pad(emb, (0, 0, 0, pad))
            idx, labels = self.all_gather(idx).reshape(-1), self.all_gather(labels).reshape(-1, 2)
            emb = self.all_gather(emb).reshape(-1, emb.shape[-1])
            keep = idx >= 0
            idx, emb, labels = idx[keep], emb[keep], labels[keep]
        n = len(idx)
        if n and (int(idx.max()) != n - 1 or len(torch.unique(idx)) != n):
            raise RuntimeError(f"the candidate loaders gave {n} candidates with indices up to "
                               f"{int(idx.max())}: every candidate must come exactly once")
        candidates = torch.empty(n, emb.shape[-1], device=emb.device)
        ordered = torch.empty(n, 2, dtype=torch.long, device=emb.device)
        candidates[idx], ordered[idx] = emb, labels
        return candidates[ordered[:, 1]], ordered[:, 0].cpu()

    def _score_pool(self, stage: str, metric: ReQARankMetric) -> dict:
        candidates, documents = self._gather_candidates()
        q_idx, q_emb, gold = self._local("question")  # each process ranks its own questions
        settings = self.evaluation
        ranks, doc_ranks = rank_questions(
            DenseScorer(q_emb, candidates), gold,
            documents if settings["doc_level"] else None, memory_mb=settings["memory_mb"])
        metric.update_ranks(ranks.to(self.device), q_idx,
                            None if doc_ranks is None else doc_ranks.to(self.device))
        if stage == "test" and self.trainer.world_size == 1:  # rqa train's per-question record
            self.test_question_ranks = (
                aggregate_min(ranks.double(), q_idx.cpu()),
                None if doc_ranks is None else aggregate_min(doc_ranks.double(), q_idx.cpu()))
        result = {k: float(v) for k, v in metric.compute().items()}
        questions = metric.num_questions
        metric.reset()
        self.log_dict({f"{stage}/{k}": v for k, v in result.items() if not k.startswith(
            ("p@", "doc_p@"))}, sync_dist=False, prog_bar=False, rank_zero_only=False)
        return {"metrics": {k: round(v, 4) for k, v in result.items()},
                "questions": questions, "candidates": len(candidates)}

    def on_validation_epoch_end(self) -> None:
        if self.trainer.sanity_checking:
            self._eval_buffers = {"answer": [], "question": []}
            return
        self._score_pool("val", self.val_metric)

    def on_test_epoch_end(self) -> None:
        self.test_results = self._score_pool("test", self.test_metric)
