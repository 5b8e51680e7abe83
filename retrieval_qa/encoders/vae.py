"""The VAE encoders of Dual-VAEs and Cross-VAEs (Cross-VAEs paper, section 3.2).

Each side is the project's tower without a projection: token embeddings, a GRU token encoder
and the multi-hop self-attention pooler of Lin et al. (2017), all built by
:mod:`retrieval_qa.encoders.builders`. On top, a :class:`GaussianHead` (two linear maps) gives
the mean and log-variance of the diagonal Gaussian posterior ``N(z; mu, diag(sigma^2))``
(latent size 512 in the paper, section 4.3).

* Training: :meth:`VAETower.latent` draws ``z = mu + sigma * eps`` (reparameterisation,
  ``eps ~ N(0, I)``) in training mode and returns ``mu`` in eval mode.
* Retrieval: ``encode_question`` / ``encode_answer`` (and the tower's ``forward``) return the
  mean ``mu``, in both modes, so the embedding of a text is deterministic.

:class:`VAEDualTowers` is a :class:`~.dual_towers.DualTowers` whose towers are
:class:`VAETower` objects, so it has the inference interface of every dual encoder
(``encode_question(**inputs)``, ``encode_answer(**inputs)``, ``output_dim``,
``trainable_parameters()``) and the sharing modes of the SDE/ADE paper (default ``ade``: two
separate encoders E_q and E_a, as in the paper's Figure 1; ``ade_spl`` shares the Gaussian
head, which takes the projection's place). The decoders are not part of it: they live in the
training module (:mod:`retrieval_qa.models.vae`), so ``towers.state_dict()`` is the whole
inference model. ``towers.config`` is the plain dict that rebuilds it with
:func:`build_vae_towers` (or :func:`towers_from_config`, which also takes the config of the
plain dual towers).

Keys of :func:`build_vae_towers`, the composed ``model.towers`` of conf/model/vae.yaml (other
top-level keys are errors):

type: vae          # marks a VAE tower config (optional here; used by towers_from_config)
encoder: {...}     # the block of builders.py (paper: GRU, 768 hidden); no chunk_rows and no
                   #   input_types (null / false if given): VAE towers encode whole batches
pooler: {...}      # the block of builders.py (paper: multi-hop self-attention)
sharing: ade       # sde | ade | ade_ste | ade_fte | ade_spl
latent_dim: 512    # size of z (paper 4.3)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import torch
from torch import nn

from ..config import plain
from ..registry import require_keys
from .builders import build_dual_towers
from .dual_towers import DualTowers, check_sharing
from .poolers import Pooler
from .token_encoder import TokenEncoder
from .tower import Tower

VAE_TOWERS_TYPE = "vae"
#: the keys of a VAE towers block (``type`` optional)
VAE_TOWER_KEYS = ("type", "encoder", "pooler", "sharing", "latent_dim")
#: the settings of a dual encoder's towers that VAE towers have not: their fixed values
_NOT_IN_VAE_TOWERS = {"chunk_rows": None, "input_types": False}

__all__ = [
    "VAE_TOWERS_TYPE",
    "GaussianHead",
    "VAEDualTowers",
    "VAETower",
    "build_vae_towers",
    "reparameterize",
    "towers_from_config",
]


class Latent(NamedTuple):
    """A batch's posterior sample ``z`` (the mean in eval mode), mean, log-variance and the
    pooler's penalty."""

    z: torch.Tensor
    mean: torch.Tensor
    logvar: torch.Tensor
    penalty: torch.Tensor


def reparameterize(mean: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """``z = mean + exp(logvar / 2) * eps`` with ``eps ~ N(0, I)``: a sample of
    ``N(mean, diag(exp(logvar)))`` differentiable in mean and logvar. ``logvar = -inf``
    (standard deviation 0) gives exactly the mean.

    Args:
        mean: the posterior's means, ``[B, Z]``.
        logvar: the posterior's log-variances ``log sigma^2``, ``[B, Z]``.

    Example:

        >>> import torch
        >>> reparameterize(torch.ones(1, 2), torch.full((1, 2), float("-inf")))
        tensor([[1., 1.]])
    """
    std = torch.exp(0.5 * logvar)
    return mean + std * torch.randn_like(std)


class GaussianHead(nn.Module):
    """Pooled ``[B, D]`` -> ``(mean[B, Z], logvar[B, Z])`` by two linear maps (section 3.2,
    "two linear transitions to obtain mean and standard deviation"; the log-variance is
    predicted, the usual unconstrained parameterisation of the standard deviation).

    As a tower's ``projection`` its ``forward`` is the mean, the retrieval embedding.

    Args:
        in_dim: ``D``, the pooled vectors' width (the pooler's ``output_dim``).
        latent_dim: ``Z``, the latent size (>= 1; ``latent_dim`` of the towers block).
    """

    def __init__(self, in_dim: int, latent_dim: int) -> None:
        super().__init__()
        if latent_dim < 1:
            raise ValueError(f"latent_dim must be >= 1, got {latent_dim}")
        self.mean = nn.Linear(in_dim, latent_dim)
        self.logvar = nn.Linear(in_dim, latent_dim)
        self.output_dim = latent_dim

    def posterior(self, pooled: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.mean(pooled), self.logvar(pooled)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.mean(pooled)


class VAETower(Tower):
    """A :class:`Tower` (token encoder, pooler) whose projection is a :class:`GaussianHead`.

    ``forward(input_ids, attention_mask, token_type_ids=None) -> mean[B, Z]`` (the embedding);
    ``posterior(...) -> (mean, logvar)``; ``latent(...) -> Latent(z, mean, logvar, penalty)``
    with ``z`` sampled in training mode and the mean in eval mode, and the pooler's penalty.

    Args:
        token_encoder: the token encoder, ``(input_ids, attention_mask, token_type_ids)`` to
            token states.
        pooler: the pooler over the token states.
        head: the :class:`GaussianHead` over the pooled vectors (the tower's projection;
            outputs are not normalised).
    """

    def __init__(self, token_encoder: TokenEncoder, pooler: Pooler, head: GaussianHead) -> None:
        super().__init__(token_encoder, pooler, head, normalize=False, chunk_rows=None)

    @property
    def head(self) -> GaussianHead:
        return self.projection  # type: ignore[return-value]

    @property
    def latent_dim(self) -> int:
        return self.output_dim

    def _posterior(self, input_ids, attention_mask, token_type_ids=None):
        states = self.token_encoder(input_ids, attention_mask, token_type_ids)
        pooled, penalty = self.pooler.pool(states, attention_mask)
        return (*self.projection.posterior(pooled), penalty)

    def posterior(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                  token_type_ids: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        return self._posterior(input_ids, attention_mask, token_type_ids)[:2]

    def latent(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
               token_type_ids: torch.Tensor | None = None) -> Latent:
        mean, logvar, penalty = self._posterior(input_ids, attention_mask, token_type_ids)
        z = reparameterize(mean, logvar) if self.training else mean
        return Latent(z, mean, logvar, penalty)


class VAEDualTowers(DualTowers):
    """Question and answer :class:`VAETower` objects (see the module docstring).

    ``latents(q_batch, a_batch) -> (Latent, Latent)`` for training; ``encode_question`` /
    ``encode_answer`` give the means. ``config`` holds the
    plain dict that :func:`build_vae_towers` rebuilds these towers from (None when the object
    was assembled by hand).

    Args:
        question_tower: the question side's :class:`VAETower`.
        answer_tower: the answer side's :class:`VAETower`; None (or the question tower) with
            ``sde``.
        sharing: one of :data:`~.dual_towers.SHARING_MODES`.
        config: the checked towers block (:func:`vae_config`) kept as :attr:`config`; None:
            none.
    """

    question_tower: VAETower
    answer_tower: VAETower

    def __init__(self, question_tower: VAETower, answer_tower: VAETower | None = None, *,
                 sharing: str, config: Mapping[str, Any] | None = None) -> None:
        for tower in (question_tower, answer_tower):
            if tower is not None and not isinstance(tower, VAETower):
                raise TypeError(f"VAEDualTowers needs VAETower objects, got {type(tower).__name__}")
        super().__init__(question_tower, answer_tower, sharing=sharing)
        self.config = dict(config) if config is not None else None

    @property
    def latent_dim(self) -> int:
        return self.output_dim

    def latents(self, q_batch: Mapping[str, torch.Tensor], a_batch: Mapping[str, torch.Tensor]
                ) -> tuple[Latent, Latent]:
        """The question and answer :class:`Latent` of one training batch."""
        q = self.question_tower.latent(q_batch["input_ids"], q_batch["attention_mask"],
                                       q_batch.get("token_type_ids"))
        a = self.answer_tower.latent(a_batch["input_ids"], a_batch["attention_mask"],
                                     a_batch.get("token_type_ids"))
        return q, a


def vae_config(cfg: Any) -> dict[str, Any]:
    """A VAE towers block, checked (keys in the module docstring), as a plain dict.

    Args:
        cfg: the towers block (dict or OmegaConf; ``model.towers`` of conf/model/vae.yaml).
    """
    given = plain(cfg)
    unknown = sorted(set(given) - set(VAE_TOWER_KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in the VAE towers config; allowed: "
                         f"{sorted(VAE_TOWER_KEYS)} (no projection: the Gaussian head is it)")
    if given.get("type", VAE_TOWERS_TYPE) != VAE_TOWERS_TYPE:
        raise ValueError(f"type={given['type']!r}; a VAE towers config has type {VAE_TOWERS_TYPE!r}")
    require_keys(given, VAE_TOWER_KEYS[1:], "towers")
    encoder = plain(given["encoder"])
    for key, fixed in _NOT_IN_VAE_TOWERS.items():
        if encoder.get(key, fixed) != fixed:
            raise ValueError(f"encoder.{key} is a dual-encoder tower setting; VAE towers "
                             f"encode whole batches without input types: leave it {fixed}")
    return {**given, "encoder": encoder, "pooler": plain(given["pooler"]),
            "sharing": check_sharing(given["sharing"]), "latent_dim": int(given["latent_dim"])}


def build_vae_towers(cfg: Any) -> VAEDualTowers:
    """:class:`VAEDualTowers` from a config (keys in the module docstring).

    The token encoders and poolers come from :func:`~.builders.build_dual_towers` (so every
    sharing mode loads pretrained word embeddings once and copies them, and draws random
    parts per tower); each side then gets its own :class:`GaussianHead` (one for ``sde``, one
    shared head for ``ade_spl``).

    Args:
        cfg: the towers block (dict or OmegaConf; ``model.towers`` of conf/model/vae.yaml),
            checked by :func:`vae_config`.
    """
    full = vae_config(cfg)
    sharing = full["sharing"]
    base = build_dual_towers({
        "encoder": {**full["encoder"], **_NOT_IN_VAE_TOWERS}, "pooler": full["pooler"],
        "projection": {"dim": None, "normalize": False, "bias": False},
        # ade_spl shares the projection, which is the Gaussian head here: build the towers
        # as plain ade and let VAEDualTowers share the head
        "sharing": "ade" if sharing == "ade_spl" else sharing,
    })
    latent = full["latent_dim"]

    def vae(tower: Tower) -> VAETower:
        return VAETower(tower.token_encoder, tower.pooler,
                        GaussianHead(tower.pooler.output_dim, latent))

    question = vae(base.question_tower)
    answer = None if sharing == "sde" else vae(base.answer_tower)
    return VAEDualTowers(question, answer, sharing=sharing, config=full)


def towers_from_config(cfg: Any) -> DualTowers:
    """Rebuild exported towers from their config: :func:`build_vae_towers` when
    ``cfg["type"] == "vae"``, else :func:`~.builders.build_dual_towers`. (For the loader of
    the inference model: ``towers_from_config(meta["towers"])``.)

    Args:
        cfg: a towers block (dict or OmegaConf), a VAE one or a dual encoder's.
    """
    given = plain(cfg)
    if given.get("type") == VAE_TOWERS_TYPE:
        return build_vae_towers(given)
    return build_dual_towers(given)

