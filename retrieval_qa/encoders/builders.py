"""Build token encoders, poolers, towers and dual towers from a ``towers`` block.

The block is the composed ``model.towers`` (conf/model/dual_encoder.yaml with what the
experiment, its profile and the command line change), or the ``towers`` that an exported
model's model.json holds: every key is given, nothing is filled in here (a missing one is an
error naming it). The composed config shows the classes: composition turns a short name
(``type: gru``) into its ``_target_`` and the arguments that class takes
(retrieval_qa/registry.py). What the keys mean:

encoder:
  _target_              the token encoder class; the short names pretrained | gru | lstm |
                        rnn | transformer (``type``) of configs and exports written before
                        stand for one. Its keys are the class's arguments, except those this
                        module reads itself (registry.BUILDER_KEYS["encoder"], below):
  pretrained            checkpoint (name, alias or path, see retrieval_qa.pretrained) of the
                        pretrained encoder, and the word-embedding source of the others. The
                        papers use bert-base-uncased; offline the packaged all-MiniLM-L6-v2 is
                        what exists, and its label says so.
  fallback              "minilm": let the packaged MiniLM stand in when `pretrained` is not
                        found (also RQA_OFFLINE_FALLBACK=minilm); null: an error instead
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
  The arguments of the project's classes (conf/model/dual_encoder.yaml holds them for every
  class; a class takes its own): gradient_checkpointing (pretrained), num_layers (ENDX 4.4:
  2 layers), hidden_size (H of the recurrent / transformer states; ENDX 4.4, Cross-VAEs:
  768; pretrained encoders take H from their checkpoint), bidirectional (recurrent: two
  directions of H/2 units each, Lin et al. 2017's BiLSTM), dropout, num_heads, feedforward_dim
  (transformer; null = 4 * hidden_size), positions (transformer: learned | sinusoidal),
  max_positions.
pooler:
  _target_              the pooler class (short names: multihop_attention | mean | cls; ENDX:
                        Lin et al.'s multi-hop attention), and its arguments: hops (r),
                        attention_dim (d_a), combine (concat: [B, r*H] as Lin et al.; mean:
                        [B, H])
projection:
  dim                   null: no projection (except ade_spl, see below)
  normalize             L2-normalise embeddings (ENDX uses the inner product)
  bias
sharing                 sde | ade | ade_ste | ade_fte | ade_spl (SDE/ADE paper)

``ade_spl`` shares the projection layer, so it needs one: when ``projection.dim`` is null a
square projection (dim = the pooler's output size) is added, like the paper's projection
after pooling, which keeps the embedding width.

A new token encoder or pooler is a class and a block that names it in ``_target_``
(:func:`retrieval_qa.registry.instantiate`). A pooler's constructor is given ``hidden_size``
(the token states' width) and has ``output_dim``. A token encoder's constructor takes
``embedder`` (the :class:`TokenEmbedder` of the section's embedding keys) or ``model`` (the
Hugging Face model of ``pretrained``, loaded once, with ``checkpoint``, its
:class:`ResolvedCheckpoint`), and it has ``hidden_size`` and ``input_dim``.

Example::

    from retrieval_qa.config import compose

    cfg = compose(["experiment=dual_gru", "profile=cpu"])
    towers = build_dual_towers(cfg.model.towers)
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from ..config import plain
from ..pretrained import ResolvedCheckpoint, load_model, resolve_pretrained
from ..registry import instantiate, require_keys, takes, target_of
from .dual_towers import DualTowers, check_sharing
from .poolers import Pooler
from .projection import Projection
from .token_embedder import TokenEmbedder
from .token_encoder import TokenEncoder
from .tower import Tower

#: The four sections of a towers block, and the keys of its projection.
TOWER_SECTIONS = ("encoder", "pooler", "projection", "sharing")
PROJECTION_KEYS = ("dim", "normalize", "bias")
_ENCODER, _POOLER, _PROJECTION = "towers.encoder", "towers.pooler", "towers.projection"
#: encoder settings added since the first exports, with the value that exports of earlier
#: versions, written before the setting existed, were computed with
ADDED_SINCE_FIRST_EXPORTS = {"chunk_rows": None, "input_types": False}


def exported_towers(towers: Any) -> dict[str, Any]:
    """The towers block of an exported model (its model.json), as the builders take it: one
    written before a setting existed gets :data:`ADDED_SINCE_FIRST_EXPORTS`'s value.

    Args:
        towers: the ``towers`` mapping of an export's model.json (a dict or a DictConfig).

    Returns:
        A plain dict; its ``encoder`` block has every key of
        :data:`ADDED_SINCE_FIRST_EXPORTS` (the values given win).

    Example:

        >>> exported_towers({"encoder": {"type": "gru"}, "sharing": "sde"})["encoder"]
        {'chunk_rows': None, 'input_types': False, 'type': 'gru'}
    """
    given = plain(towers)
    if isinstance(given.get("encoder"), dict):
        given["encoder"] = {**ADDED_SINCE_FIRST_EXPORTS, **given["encoder"]}
    return given


def _resolve(enc: dict[str, Any]) -> ResolvedCheckpoint:
    require_keys(enc, ("pretrained", "fallback"), _ENCODER)
    return resolve_pretrained(str(enc["pretrained"]), fallback=enc["fallback"])


def build_token_embedder(encoder: Any, weight: torch.Tensor | None = None) -> TokenEmbedder:
    """A :class:`TokenEmbedder` per the ``encoder`` block: random when ``vocab_size`` and
    ``embedding_dim`` are set, else ``weight`` when given (a ``[V, E]`` matrix, copied), else
    the word embeddings of ``encoder.pretrained``.

    Args:
        encoder: the ``towers.encoder`` block; reads ``vocab_size``, ``embedding_dim``,
            ``padding_idx``, ``freeze_embeddings`` (and ``pretrained``, ``fallback`` when
            the table comes from a checkpoint).
        weight: a ``[V, E]`` matrix to copy; None: random or the checkpoint's.

    Example:

        >>> encoder = {"vocab_size": 50, "embedding_dim": 8, "padding_idx": 0,
        ...            "freeze_embeddings": False}
        >>> build_token_embedder(encoder).embedding
        Embedding(50, 8, padding_idx=0)
    """
    enc = plain(encoder)
    require_keys(enc, ("vocab_size", "embedding_dim", "padding_idx", "freeze_embeddings"), _ENCODER)
    freeze = bool(enc["freeze_embeddings"])
    pad = enc["padding_idx"]
    vocab, dim = enc["vocab_size"], enc["embedding_dim"]
    if (vocab is None) != (dim is None):
        raise ValueError(
            "encoder.vocab_size and encoder.embedding_dim go together: set both for a random "
            "table, or neither to use the word embeddings of encoder.pretrained"
        )
    if vocab is not None:
        return TokenEmbedder(int(vocab), int(dim), padding_idx=pad, freeze=freeze)
    if weight is not None:
        return TokenEmbedder.from_matrix(weight, padding_idx=pad, freeze=freeze)
    resolved = _resolve(enc)
    model = load_model(resolved)
    pad_id = getattr(model.config, "pad_token_id", pad)
    return TokenEmbedder.from_matrix(
        model.get_input_embeddings().weight.detach(), padding_idx=pad_id, freeze=freeze,
        source=f"word embeddings of {resolved.label}",
    )


def checkpoint_use(encoder: Any, label: str) -> str:
    """How a two-tower method's outputs name its checkpoint (their ``pretrained``): ``label``
    (:attr:`~retrieval_qa.pretrained.ResolvedCheckpoint.label`) when the towers are the
    checkpoint's model; else the part of it they use, so that a GRU over MiniLM's word
    embeddings does not read as MiniLM the encoder.

    Args:
        encoder: the ``model.towers.encoder`` block.
        label: the resolved checkpoint's label.

    Example:

        >>> checkpoint_use({"type": "gru", "embedding_dim": None}, "bert-base-uncased")
        'only the tokenizer and token-embedding table of bert-base-uncased'
    """
    enc = plain(encoder)
    if not (enc.get("_target_") or enc.get("type")) or _over_model(enc):
        return label  # a method's own towers (no encoder class named) or the checkpoint's model
    if enc.get("embedding_dim") is not None:
        return f"only the tokenizer of {label} (a random token-embedding table)"
    return f"only the tokenizer and token-embedding table of {label}"


def _over_model(enc: dict[str, Any]) -> bool:
    """Whether the encoder class is built over a Hugging Face model (else a token table)."""
    return takes(target_of(enc, _ENCODER, "encoder"), "model")


def _token_encoder(enc: dict[str, Any], **context) -> TokenEncoder:
    """The ``encoder`` block's class over ``embedder`` or ``model`` (``context``); a
    pretrained model's token embedder frozen when ``freeze_embeddings`` says so."""
    encoder = instantiate(enc, _ENCODER, "encoder", **context)
    if "model" in context:
        require_keys(enc, ("freeze_embeddings",), _ENCODER)
        if enc["freeze_embeddings"]:
            encoder.freeze_token_embedder()
    return encoder


def build_token_encoder(
    encoder: Any,
    *,
    token_embedder: TokenEmbedder | None = None,
    model: nn.Module | None = None,
) -> TokenEncoder:
    """A token encoder per the ``encoder`` block.

    Args:
        encoder: the ``towers.encoder`` block (its ``_target_`` names the class).
        token_embedder: reuse this table (encoders over a token embedder) instead of building
            one; None: build it (:func:`build_token_embedder`).
        model: use this already loaded Hugging Face model (encoders over a model,
            ``pretrained``) instead of loading ``encoder.pretrained``; None: load it.

    Example:

        >>> from retrieval_qa.config import compose_group
        >>> towers = compose_group("model", "dual_encoder", {"towers": {
        ...     "encoder": {"type": "gru", "vocab_size": 50, "embedding_dim": 8,
        ...                 "hidden_size": 8},
        ...     "pooler": {"type": "mean"}}}).towers
        >>> encoder = build_token_encoder(towers.encoder)
        >>> type(encoder).__name__, encoder.hidden_size
        ('RecurrentTokenEncoder', 8)
    """
    enc = plain(encoder)
    if _over_model(enc):
        checkpoint = None
        if model is None:
            checkpoint = _resolve(enc)
            model = load_model(checkpoint)
        return _token_encoder(enc, model=model, checkpoint=checkpoint)
    embedder = token_embedder if token_embedder is not None else build_token_embedder(enc)
    return _token_encoder(enc, embedder=embedder)


def build_pooler(pooler: Any, hidden_size: int) -> Pooler:
    """A pooler per the ``pooler`` block, over states of width ``hidden_size``.

    Args:
        pooler: the ``towers.pooler`` block (its ``_target_`` and the class's arguments).
        hidden_size: H, the width of the token states it pools.

    Example:

        >>> pooler = build_pooler({"_target_": "retrieval_qa.encoders.poolers.MeanPooler"}, 8)
        >>> pooler.output_dim
        8
    """
    return instantiate(plain(pooler), _POOLER, "pooler", hidden_size=hidden_size)


def build_projection(projection: Any, in_dim: int, required: bool = False
                     ) -> Projection | None:
    """A :class:`Projection` to ``projection.dim``; None when dim is null, unless
    ``required`` (then a square ``in_dim -> in_dim`` projection).

    Args:
        projection: the ``towers.projection`` block (``dim``, ``normalize``, ``bias``).
        in_dim: the width of the pooled vectors it maps.
        required: give a projection even when ``dim`` is null (ADE-SPL shares one).

    Example:

        >>> block = {"dim": None, "normalize": False, "bias": False}
        >>> build_projection(block, 8) is None
        True
        >>> build_projection(block, 8, required=True).output_dim
        8
    """
    proj = plain(projection)
    require_keys(proj, PROJECTION_KEYS, _PROJECTION)
    dim = proj["dim"]
    if dim is None and not required:
        return None
    return Projection(in_dim, int(dim) if dim is not None else in_dim, bias=bool(proj["bias"]))


def _sections(towers: Any) -> dict[str, Any]:
    """The four sections of a towers block (other keys are a method's own), each given."""
    given = plain(towers)
    require_keys(given, TOWER_SECTIONS, "towers")
    enc, proj = plain(given["encoder"]), plain(given["projection"])
    require_keys(enc, ("chunk_rows", "input_types"), _ENCODER)
    require_keys(proj, PROJECTION_KEYS, _PROJECTION)
    unknown = sorted(set(proj) - set(PROJECTION_KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in {_PROJECTION}; allowed: "
                         f"{list(PROJECTION_KEYS)}")
    return {**given, "encoder": enc, "projection": proj,
            "sharing": check_sharing(given["sharing"])}


def build_tower(towers: Any, *, token_encoder: TokenEncoder | None = None,
                projection_required: bool = False) -> Tower:
    """One :class:`Tower` from a towers block (``encoder``, ``pooler``, ``projection``).

    Args:
        towers: a towers block (all four sections given; ``sharing`` is checked, not used).
        token_encoder: use this token encoder; None: build one from ``towers.encoder``.
        projection_required: add a square projection when ``projection.dim`` is null.

    Example:

        >>> import torch
        >>> from retrieval_qa.config import compose_group
        >>> towers = compose_group("model", "dual_encoder", {"towers": {
        ...     "encoder": {"type": "gru", "vocab_size": 50, "embedding_dim": 8,
        ...                 "hidden_size": 8},
        ...     "pooler": {"type": "mean"}}}).towers
        >>> tower = build_tower(towers)
        >>> tower(torch.randint(1, 50, (2, 5)), torch.ones(2, 5)).shape
        torch.Size([2, 8])
    """
    full = _sections(towers)
    enc = full["encoder"]
    encoder = token_encoder if token_encoder is not None else build_token_encoder(enc)
    pooler = build_pooler(full["pooler"], encoder.hidden_size)
    projection = build_projection(full["projection"], pooler.output_dim, projection_required)
    input_types = None
    if enc["input_types"]:
        input_types = nn.Embedding(2, encoder.input_dim)
        nn.init.zeros_(input_types.weight)
    return Tower(encoder, pooler, projection, normalize=bool(full["projection"]["normalize"]),
                 chunk_rows=enc["chunk_rows"], input_types=input_types)


def build_dual_towers(towers: Any) -> DualTowers:
    """:class:`DualTowers` from a towers block (see the module docstring for its keys).

    Asymmetric variants load a pretrained checkpoint (or its word-embedding matrix) once and
    give each tower its own copy, so both start from the same pretrained weights, as in the
    SDE/ADE paper; randomly initialised parts (pooler, projection, recurrent or transformer
    layers) are drawn independently per tower.

    Args:
        towers: a towers block (``model.towers`` of a composed config, or an export's
            ``towers`` through :func:`exported_towers`).

    Example:

        >>> import torch
        >>> from retrieval_qa.config import compose_group
        >>> towers = compose_group("model", "dual_encoder", {"towers": {
        ...     "encoder": {"type": "gru", "vocab_size": 50, "embedding_dim": 8,
        ...                 "hidden_size": 8},
        ...     "pooler": {"type": "mean"}}}).towers
        >>> dual = build_dual_towers(towers)
        >>> dual.sharing, dual.output_dim
        ('sde', 8)
        >>> ids, mask = torch.randint(1, 50, (3, 6)), torch.ones(3, 6)
        >>> dual.encode_question(ids, mask).shape
        torch.Size([3, 8])
    """
    full = _sections(towers)
    sharing = full["sharing"]
    enc = full["encoder"]
    if sharing == "sde":
        return DualTowers(build_tower(full), None, sharing="sde")

    if _over_model(enc):
        checkpoint = _resolve(enc)
        model = load_model(checkpoint)
        encoders = [_token_encoder(enc, model=m, checkpoint=checkpoint)
                    for m in (model, copy.deepcopy(model))]
    else:
        require_keys(enc, ("vocab_size",), _ENCODER)
        if enc["vocab_size"] is None:  # pretrained word embeddings: load once, copy
            first = build_token_embedder(enc)
            embedders = [first, copy.deepcopy(first)]
        else:  # random tables, drawn per tower
            embedders = [build_token_embedder(enc) for _ in range(2)]
        encoders = [build_token_encoder(enc, token_embedder=e) for e in embedders]
    question, answer = (
        build_tower(full, token_encoder=e, projection_required=sharing == "ade_spl")
        for e in encoders
    )
    return DualTowers(question, answer, sharing=sharing)
