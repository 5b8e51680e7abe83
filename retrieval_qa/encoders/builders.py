"""Build token encoders, poolers, towers and dual towers from a config (dict or OmegaConf).

The keys and their defaults are those of ``towers`` in ``conf/model/dual_encoder.yaml`` (read
by :func:`tower_defaults`; this module keeps no copy). Unknown keys inside ``encoder``,
``pooler`` and ``projection`` are errors naming the allowed keys, so typos surface; other
top-level keys are ignored, so a method's whole model config (with its loss and optimiser
keys) can be passed in. What the keys mean:

encoder:
  type                  pretrained | gru | lstm | rnn | transformer (short names of
                        retrieval_qa/registry.py); or `_target_`: any token encoder class, see
                        below
  pretrained            checkpoint (name, alias or path, see retrieval_qa.pretrained) of the
                        pretrained encoder, and the word-embedding source of the others. The
                        papers use bert-base-uncased; offline the packaged all-MiniLM-L6-v2 is
                        what exists, and its label says so.
  fallback              "minilm": let the packaged MiniLM stand in when `pretrained` is not
                        found (also RQA_OFFLINE_FALLBACK=minilm); null: an error instead
  gradient_checkpointing  pretrained only
  num_layers            recurrent / transformer layers (ENDX 4.4: 2 layers)
  hidden_size           H of the recurrent / transformer states (ENDX 4.4, Cross-VAEs: 768);
                        pretrained encoders take H from their checkpoint
  bidirectional         recurrent: two directions of H/2 units each (Lin et al. 2017 BiLSTM)
  dropout
  num_heads             transformer heads (ENDX uses 12 cross-attention heads)
  feedforward_dim       transformer; null = 4 * hidden_size
  positions             transformer: learned | sinusoidal
  max_positions
  freeze_embeddings     freeze the token embedder in every sharing mode
  vocab_size, embedding_dim  both set: a random table (tests); both null: the word
                        embeddings of `pretrained`
  padding_idx
  chunk_rows            encode a batch in length-sorted chunks of this many rows, each padded
                        only to its own longest text (same embeddings, less padding's
                        compute: a CPU speed-up); null: the whole batch at once
  input_types           a learned input-type vector per side (question, answer), added to every
                        input token's embedding so one shared tower knows which side it
                        encodes (supervised-mining paper 4.2); zero-initialised, so training
                        starts from the checkpoint's own encodings. sharing: sde only
pooler:
  type                  multihop_attention | mean | cls (ENDX: Lin et al. multi-hop); or
                        `_target_`: any pooler class, see below
  hops                  r
  attention_dim         d_a (Lin et al. 2017)
  combine               concat: [B, r*H] as Lin et al.; mean: [B, H]
projection:
  dim                   null: no projection (except ade_spl, see below)
  normalize             L2-normalise embeddings (ENDX uses the inner product)
  bias
sharing                 sde | ade | ade_ste | ade_fte | ade_spl (SDE/ADE paper)

``ade_spl`` shares the projection layer, so it needs one: when ``projection.dim`` is null a
square projection (dim = the pooler's output size) is added, like the paper's projection
after pooling, which keeps the embedding width.

A new token encoder or pooler is a class and a block that names it: ``_target_`` in
``encoder`` or ``pooler`` (:func:`retrieval_qa.registry.instantiate`). Its keyword arguments
are the block's keys that it takes (the section's keys above are shared: a class takes those
it names) and keys of its own. A pooler's constructor is given ``hidden_size`` (the token
states' width) and has ``output_dim``. A token encoder's constructor takes ``embedder`` (the
:class:`TokenEmbedder` of the section's embedding keys) or ``model`` (the Hugging Face model
of ``pretrained``, loaded once, with ``checkpoint``, its :class:`ResolvedCheckpoint`), and it
has ``hidden_size`` and ``input_dim``.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from ..config import model_defaults, plain
from ..pretrained import ResolvedCheckpoint, load_model, resolve_pretrained
from ..registry import instantiate, takes, target_of
from .dual_towers import SHARING_MODES, DualTowers, check_sharing
from .poolers import Pooler
from .projection import Projection
from .token_embedder import TokenEmbedder
from .token_encoder import TokenEncoder
from .tower import Tower

#: The four sections of a towers config; their defaults are in conf/model/dual_encoder.yaml.
TOWER_SECTIONS = ("encoder", "pooler", "projection", "sharing")


def tower_defaults() -> dict[str, Any]:
    """``towers`` of ``conf/model/dual_encoder.yaml``: every key of the four sections with
    its default (a fresh copy)."""
    towers = model_defaults("dual_encoder")["towers"]
    missing = [k for k in TOWER_SECTIONS if k not in towers]
    if missing:
        raise KeyError(f"conf/model/dual_encoder.yaml: towers has no {missing}")
    return {k: towers[k] for k in TOWER_SECTIONS}


def _section(cfg: Any, defaults: dict[str, Any], name: str) -> dict[str, Any]:
    """``cfg`` over ``defaults``; unknown keys raise ValueError naming the section (a block
    that names its class in ``_target_`` may add the keys that class takes)."""
    given = plain(cfg)
    unknown = sorted(set(given) - set(defaults) - {"_target_"})
    if given.get("_target_"):
        target = target_of(given, name)
        unknown = [k for k in unknown if not takes(target, k)]
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in {name}; allowed: {sorted(defaults)}")
    return {**defaults, **given}


def _choice(value: Any, allowed: tuple[str, ...] | list[str], key: str) -> str:
    if value not in allowed:
        raise ValueError(f"{key}={value!r}; expected one of {list(allowed)}")
    return value


def _resolve(enc: dict[str, Any]) -> ResolvedCheckpoint:
    return resolve_pretrained(str(enc["pretrained"]), fallback=enc["fallback"])


def build_token_embedder(
    encoder_cfg: Any = None, weight: torch.Tensor | None = None
) -> TokenEmbedder:
    """A :class:`TokenEmbedder` per the ``encoder`` section: random when ``vocab_size`` and
    ``embedding_dim`` are set, else ``weight`` when given (a ``[V, E]`` matrix, copied), else
    the word embeddings of ``encoder.pretrained``."""
    enc = _section(encoder_cfg, tower_defaults()["encoder"], "encoder")
    freeze = bool(enc["freeze_embeddings"])
    pad = enc["padding_idx"]
    vocab, dim = enc["vocab_size"], enc["embedding_dim"]
    if (vocab is None) != (dim is None):
        raise ValueError(
            "encoder.vocab_size and encoder.embedding_dim go together: set both for a random "
            "table, or neither to use the word embeddings of encoder.pretrained"
        )
    if vocab is not None:
        return TokenEmbedder(int(vocab), int(dim), pad, freeze)
    if weight is not None:
        return TokenEmbedder.from_matrix(weight, pad, freeze)
    resolved = _resolve(enc)
    model = load_model(resolved)
    pad_id = getattr(model.config, "pad_token_id", pad)
    return TokenEmbedder.from_matrix(
        model.get_input_embeddings().weight.detach(), pad_id, freeze,
        f"word embeddings of {resolved.label}",
    )


def _encoder_target(enc: dict[str, Any]) -> Any:
    return target_of(enc, "encoder", "encoder")


def _token_encoder(enc: dict[str, Any], **context) -> TokenEncoder:
    """The ``encoder`` section's class over ``embedder`` or ``model`` (``context``); a
    pretrained model's token embedder frozen when ``freeze_embeddings`` says so."""
    encoder = instantiate(enc, "encoder", "encoder", shared=tower_defaults()["encoder"],
                          **context)
    if "model" in context and enc["freeze_embeddings"]:
        encoder.freeze_token_embedder()
    return encoder


def build_token_encoder(
    encoder_cfg: Any = None,
    *,
    token_embedder: TokenEmbedder | None = None,
    model: nn.Module | None = None,
) -> TokenEncoder:
    """A token encoder per the ``encoder`` config section.

    token_embedder: reuse this table (encoders over a token embedder) instead of building one.
    model: use this already loaded Hugging Face model (encoders over a model, ``pretrained``)
        instead of loading ``encoder.pretrained``.
    """
    enc = _section(encoder_cfg, tower_defaults()["encoder"], "encoder")
    if takes(_encoder_target(enc), "model"):
        checkpoint = None
        if model is None:
            checkpoint = _resolve(enc)
            model = load_model(checkpoint)
        return _token_encoder(enc, model=model, checkpoint=checkpoint)
    embedder = token_embedder if token_embedder is not None else build_token_embedder(enc)
    return _token_encoder(enc, embedder=embedder)


def build_pooler(pooler_cfg: Any, hidden_size: int) -> Pooler:
    """A pooler per the ``pooler`` config section, over states of width ``hidden_size``."""
    defaults = tower_defaults()["pooler"]
    pool = _section(pooler_cfg, defaults, "pooler")
    return instantiate(pool, "pooler", "pooler", shared=defaults, hidden_size=hidden_size)


def build_projection(projection_cfg: Any, in_dim: int, required: bool = False
                     ) -> Projection | None:
    """A :class:`Projection` to ``projection.dim``; None when dim is null, unless
    ``required`` (then a square ``in_dim -> in_dim`` projection)."""
    proj = _section(projection_cfg, tower_defaults()["projection"], "projection")
    dim = proj["dim"]
    if dim is None and not required:
        return None
    return Projection(in_dim, int(dim) if dim is not None else in_dim, bool(proj["bias"]))


def build_tower(cfg: Any = None, *, token_encoder: TokenEncoder | None = None,
                projection_required: bool = False) -> Tower:
    """One :class:`Tower` from a full config (``encoder``, ``pooler``, ``projection``)."""
    full = _full_config(cfg)
    encoder = token_encoder if token_encoder is not None else build_token_encoder(full["encoder"])
    pooler = build_pooler(full["pooler"], encoder.hidden_size)
    projection = build_projection(full["projection"], pooler.output_dim, projection_required)
    input_types = None
    if full["encoder"]["input_types"]:
        input_types = nn.Embedding(2, encoder.input_dim)
        nn.init.zeros_(input_types.weight)
    return Tower(encoder, pooler, projection, bool(full["projection"]["normalize"]),
                 full["encoder"]["chunk_rows"], input_types)


def _full_config(cfg: Any) -> dict[str, Any]:
    """The four known top-level keys, defaults filled in. Other top-level keys (a method's
    loss or optimiser settings) are left to their owners; inside the sections unknown keys
    are errors."""
    given = plain(cfg)
    defaults = tower_defaults()
    full = {**defaults, **{k: v for k, v in given.items() if k in defaults}}
    return {
        "encoder": _section(full["encoder"], defaults["encoder"], "encoder"),
        "pooler": _section(full["pooler"], defaults["pooler"], "pooler"),
        "projection": _section(full["projection"], defaults["projection"], "projection"),
        "sharing": _choice(full["sharing"], tuple(SHARING_MODES), "sharing"),
    }


def build_dual_towers(cfg: Any = None) -> DualTowers:
    """:class:`DualTowers` from a config (see the module docstring for keys and defaults).

    Asymmetric variants load a pretrained checkpoint (or its word-embedding matrix) once and
    give each tower its own copy, so both start from the same pretrained weights, as in the
    SDE/ADE paper; randomly initialised parts (pooler, projection, recurrent or transformer
    layers) are drawn independently per tower.
    """
    full = _full_config(cfg)
    sharing = check_sharing(full["sharing"])
    enc = full["encoder"]
    spl = sharing == "ade_spl"
    if sharing == "sde":
        return DualTowers(build_tower(full), None, "sde")

    if takes(_encoder_target(enc), "model"):
        checkpoint = _resolve(enc)
        model = load_model(checkpoint)
        encoders = [_token_encoder(enc, model=m, checkpoint=checkpoint)
                    for m in (model, copy.deepcopy(model))]
    else:
        if enc["vocab_size"] is None:  # pretrained word embeddings: load once, copy
            first = build_token_embedder(enc)
            embedders = [first, copy.deepcopy(first)]
        else:  # random tables, drawn per tower
            embedders = [build_token_embedder(enc) for _ in range(2)]
        encoders = [build_token_encoder(enc, token_embedder=e) for e in embedders]
    question, answer = (
        build_tower(full, token_encoder=e, projection_required=spl) for e in encoders
    )
    return DualTowers(question, answer, sharing)
