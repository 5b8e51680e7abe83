"""Dual-VAEs and Cross-VAEs (Cross-VAEs paper, sections 3.1-3.2 and 4.3) as one module.

Encoders ``E_q``, ``E_a`` (:mod:`retrieval_qa.encoders.vae`) give Gaussian posteriors of the
question and answer latents ``z_q``, ``z_a``; two decoders (:mod:`retrieval_qa.encoders.
vae_decoders`), ``D_q`` generating question texts and ``D_a`` generating answer texts,
reconstruct:

* ``mode: dual`` (Dual-VAEs, Shen et al. 2018): ``D_q(z_q)`` -> the question,
  ``D_a(z_a)`` -> the answer (each side reconstructs its own text);
* ``mode: cross`` (Cross-VAEs, eq. 4): ``D_q(z_a)`` -> the question, ``D_a(z_q)`` -> the
  answer (each side generates its aligned counterpart).

Objective (eq. 7, minimised)::

    loss = alpha * (recon_q + recon_a) + beta(epoch) * (KL_q + KL_a) + gamma * L_match

with the reconstruction NLL of :mod:`~retrieval_qa.losses.reconstruction` (per text, summed
over its tokens), the Gaussian KL of eq. 5 (:mod:`~retrieval_qa.losses.gaussian_kl`), the
matching BCE of eq. 6 over the in-batch pairs (:mod:`~retrieval_qa.losses.matching`) and
beta annealed by 2/epochs per epoch up to 1 (:mod:`retrieval_qa.models.vae_schedule`). The paper
gives no values for alpha and gamma (defaults 1). The CPU profiles of ``dual_vae`` and
``cross_vae`` average the reconstruction NLL per target token (``loss.reconstruction:
token``, in effect alpha of about 1 / text length): with the summed NLL (hundreds of nats
per text against a matching BCE of about 0.7) their short runs stayed at chance
(results/vaes/README.md).

The decoders always read the sampled latents (the reparameterised ``z``). The matching term
reads ``loss.match_on``: ``mean`` (default) the posterior means, i.e. the very embeddings that
are ranked at retrieval, or ``sample`` the sampled ``z`` (a one-draw estimate of eq. 3's
expectation over the posteriors). Eq. 3 suggests ``sample``, but with the KL weight annealed
to 1 the posteriors stay near the prior (sigma about 1 against small means), the sampled
cosines are mostly noise, and in our short runs on toy pairs the matching loss then stayed at
chance (log 2) while ``mean`` learned it. Logged:
``train/recon`` (with ``train/recon_question`` and ``train/recon_answer``), ``train/kl``,
``train/match``, ``train/beta``, ``train/loss`` (and ``train/attention_penalty`` when
``loss.penalty_coef`` is set). Per-pair weights (``batch["weight"]``) are not used. A decoder
reconstructs the tokens its side's tower reads (with ``data.answer_with_context`` the answer
decoder thus also reconstructs the context segment).

Retrieval (validation, test, export): the latent means, ranked by cosine (section 3.2), as
any dual encoder's towers: ``self.towers`` is a :class:`~retrieval_qa.encoders.vae.
VAEDualTowers` and holds no decoder weight, so ``towers.state_dict()`` is the exported model
and ``towers.config`` rebuilds it (``towers_builder``, read by the artefact loader).

``model`` config (conf/model/vae.yaml): ``mode``, ``towers`` (see encoders/vae.py),
``decoder`` (see encoders/vae_decoders.py), ``loss``, ``optimizer``.
"""

from __future__ import annotations

from typing import Any

import torch

from ..config import plain
from ..encoders.vae import build_vae_towers
from ..encoders.vae_decoders import (
    build_decoder,
    decoder_config,
    training_vocabulary,
    word_embedding,
)
from ..losses.gaussian_kl import GaussianKLLoss
from ..losses.matching import LatentMatchingLoss
from ..losses.reconstruction import TokenReconstructionLoss
from ..registry import require_keys
from .base import RetrievalModule
from .vae_schedule import KLAnnealing

MODES = ("dual", "cross")
MATCH_ON = ("sample", "mean")



#: the keys of ``model.loss`` (conf/model/vae.yaml; ``kl`` and ``matching`` are blocks: the
#: arguments of :class:`KLAnnealing`, less the run's epochs, and :class:`LatentMatchingLoss`)
LOSS_KEYS = ("similarity", "alpha", "gamma", "reconstruction", "kl", "matching", "match_on",
             "penalty_coef")
KL_KEYS = ("epochs", "rate_factor", "max_beta", "start")


def loss_config(cfg: Any) -> dict[str, Any]:
    """The ``loss`` block as a plain dict, checked: a missing or unknown key is an error.

    Args:
        cfg: ``model.loss`` (dict or OmegaConf; conf/model/vae.yaml): the keys
            :data:`LOSS_KEYS`, its ``kl`` block the keys :data:`KL_KEYS`.
    """
    full = plain(cfg)
    require_keys(full, LOSS_KEYS, "model.loss")
    unknown = sorted(set(full) - set(LOSS_KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in loss; allowed: {sorted(LOSS_KEYS)}")
    full["kl"], full["matching"] = plain(full["kl"]), plain(full["matching"])
    require_keys(full["kl"], KL_KEYS, "model.loss.kl")
    unknown = sorted(set(full["kl"]) - set(KL_KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in loss.kl; allowed: {sorted(KL_KEYS)}")
    if full["match_on"] not in MATCH_ON:
        raise ValueError(f"loss.match_on={full['match_on']!r}; expected one of {list(MATCH_ON)}")
    return full


class VAEModule(RetrievalModule):
    """Dual-VAEs (``mode="dual"``) or Cross-VAEs (``mode="cross"``); see the module
    docstring. The export is the encoders (latent means), rebuilt by ``towers_from_config``.

    Args:
        towers: the ``model.towers`` block of conf/model/vae.yaml (the encoders and
            ``latent_dim``).
        decoder: the ``model.decoder`` block (the decoders of both sides).
        loss: the ``model.loss`` block (``alpha``, ``gamma``, ``kl``, ``matching``,
            ``reconstruction``, ``match_on``, ...), checked by :func:`loss_config`.
        optimizer: the ``model.optimizer`` block.
        mode: ``"dual"`` (each side reconstructs its own text) or ``"cross"`` (each side
            generates the other's).
        evaluation: the ``eval`` group's settings.

    Example:

        >>> from retrieval_qa.registry import config_values, instantiate
        >>> from retrieval_qa.config import compose_group
        >>> tiny = {"towers": {"encoder": {"type": "gru", "vocab_size": 50,
        ...                                 "embedding_dim": 8, "hidden_size": 8},
        ...                     "pooler": {"type": "mean"}}}
        >>> model = compose_group("model", "vae", tiny)  # conf/model/vae.yaml
        >>> evaluation = config_values(compose_group("eval", "default"))
        >>> module = instantiate(model, "model", evaluation=evaluation)
        >>> type(module).__name__, module.mode, module.towers.latent_dim
        ('VAEModule', 'cross', 512)
    """

    #: the divergence check watches the reconstruction: the total's KL term grows by design as
    #: its weight anneals up from 0
    divergence_term = "train/recon"

    towers_builder = "retrieval_qa.encoders.vae.towers_from_config"

    def __init__(self, towers: dict, decoder: dict, loss: dict, optimizer: dict,
                 *, mode: str, evaluation: dict) -> None:
        loss = loss_config(loss)
        super().__init__(optimizer, loss["similarity"], evaluation)
        self.save_hyperparameters()
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}; expected one of {list(MODES)}")
        self.mode = mode
        self.towers = build_vae_towers(towers)
        self.decoder_cfg = decoder_config(decoder)
        latent = self.towers.latent_dim
        # each decoder ties to the token table of the tower that reads the same side's texts
        self.question_decoder = build_decoder(
            self.decoder_cfg, latent, word_embedding(self.towers.question_tower.token_encoder))
        self.answer_decoder = build_decoder(
            self.decoder_cfg, latent, word_embedding(self.towers.answer_tower.token_encoder))
        self.recon_loss = TokenReconstructionLoss(reduction=loss["reconstruction"])
        self.kl_loss = GaussianKLLoss()
        self.match_loss = LatentMatchingLoss(**loss["matching"])
        self.alpha, self.gamma = float(loss["alpha"]), float(loss["gamma"])
        self.kl_cfg = loss["kl"]
        self.match_on = loss["match_on"]
        self.penalty_coef = float(loss["penalty_coef"])
        self._kl_schedule: KLAnnealing | None = None
        self.train()  # from_pretrained leaves Hugging Face models in eval mode (no dropout)

    # ---- set-up ---------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        """``decoder.output_vocab: train``: restrict each decoder's softmax to the tokens of
        that side's training texts, tokenised as the data module does (exact on them)."""
        if stage != "fit" or self.decoder_cfg["output_vocab"] != "train":
            return
        data = self.trainer.datamodule
        if data is None or not hasattr(data, "train_pairs") or not hasattr(data, "tokenizer"):
            raise ValueError("decoder.output_vocab=train needs a data module with train_pairs "
                             "and tokenizer; use output_vocab=full")
        pairs = data.train_pairs
        questions = sorted({p.question for p in pairs})
        answers = sorted({(p.answer, p.context) for p in pairs})
        with_context = bool(getattr(data, "answer_with_context", False))
        self.question_decoder.restrict(training_vocabulary(
            data.tokenizer, questions, data.max_question_length))
        self.answer_decoder.restrict(training_vocabulary(
            data.tokenizer, [a for a, _ in answers], data.max_answer_length,
            [c for _, c in answers] if with_context else None))

    # ---- schedule -------------------------------------------------------------------------
    def training_epochs(self) -> float:
        """The run's length in epochs: ``loss.kl.epochs`` when set, else the trainer's
        (``max_epochs``, or fewer when ``max_steps`` ends the run first); 1 without a
        trainer."""
        if self.kl_cfg["epochs"]:
            return float(self.kl_cfg["epochs"])
        trainer = self._trainer
        if trainer is None:
            return 1.0
        per_epoch = float(trainer.num_training_batches)
        if per_epoch > 0 and per_epoch != float("inf"):
            steps = float(trainer.estimated_stepping_batches) * trainer.accumulate_grad_batches
            return max(steps / per_epoch, 1e-9)
        return float(max(trainer.max_epochs or 1, 1))

    def kl_schedule(self) -> KLAnnealing:
        if self._kl_schedule is None:
            self._kl_schedule = KLAnnealing(
                self.training_epochs(), rate_factor=float(self.kl_cfg["rate_factor"]),
                max_beta=float(self.kl_cfg["max_beta"]), start=float(self.kl_cfg["start"]))
        return self._kl_schedule

    # ---- objective ------------------------------------------------------------------------
    def reconstruction_terms(self, zq: torch.Tensor, za: torch.Tensor, batch: dict
                             ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(recon_question, recon_answer)``: ``D_q`` reconstructs the question text from
        ``z_q`` (dual) or ``z_a`` (cross); ``D_a`` the answer text from ``z_a`` (dual) or
        ``z_q`` (cross)."""
        to_question, to_answer = (zq, za) if self.mode == "dual" else (za, zq)
        q, a = batch["question"], batch["answer"]
        recon_q = self.recon_loss(*self.question_decoder(
            to_question, q["input_ids"], q["attention_mask"]))
        recon_a = self.recon_loss(*self.answer_decoder(
            to_answer, a["input_ids"], a["attention_mask"]))
        return recon_q, recon_a

    def losses(self, batch: dict, beta: float) -> tuple[torch.Tensor, dict]:
        """Eq. 7 on one batch with KL weight ``beta``: ``(loss, {log name: value})``."""
        (zq, mean_q, logvar_q, pen_q), (za, mean_a, logvar_a, pen_a) = self.towers.latents(
            batch["question"], batch["answer"])
        recon_q, recon_a = self.reconstruction_terms(zq, za, batch)
        recon = recon_q + recon_a
        kl = self.kl_loss(mean_q, logvar_q) + self.kl_loss(mean_a, logvar_a)
        match = (self.match_loss(zq, za) if self.match_on == "sample"
                 else self.match_loss(mean_q, mean_a))
        loss = self.alpha * recon + beta * kl + self.gamma * match
        logs = {"train/recon": recon, "train/recon_question": recon_q,
                "train/recon_answer": recon_a, "train/kl": kl, "train/match": match,
                "train/beta": float(beta), "train/match_scale": self.match_loss.scale.detach()}
        loss = self.add_penalty(loss, pen_q + pen_a, logs)
        logs["train/loss"] = loss
        return loss, logs

    def training_step(self, batch, batch_idx):
        beta = self.kl_schedule()(self.epoch_progress(batch_idx))
        loss, logs = self.losses(batch, beta)
        return self.log_training(loss, logs, batch_idx, batch["question"]["input_ids"].shape[0])

    # ---- export ---------------------------------------------------------------------------
    def towers_config(self) -> dict:
        return dict(self.towers.config or {})
