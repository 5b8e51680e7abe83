"""One registry builds every block: ``_target_`` or a short name of SHORT_NAMES, the block's
keys as arguments (a ``_target_`` block's all of them but its builder's own; a short-named
block's those its class takes), and the caller's context where the target takes it.
Composition resolves the short names (resolve_blocks): the composed block shows the class."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from retrieval_qa.errors import UnknownKeyError
from retrieval_qa.registry import (
    BUILDER_KEYS,
    SHORT_NAMES,
    instantiate,
    locate,
    resolve,
    resolve_blocks,
    target_of,
)


class Scaled:
    def __init__(self, hidden_size, factor):
        self.hidden_size, self.factor = hidden_size, factor


HERE = f"{__name__}.Scaled"


@pytest.mark.parametrize(("kind", "name"), [(k, n) for k, (_, names) in SHORT_NAMES.items()
                                            for n in names])
def test_every_short_name_names_a_callable(kind, name):
    key = SHORT_NAMES[kind][0]
    assert callable(target_of({key: name}, kind, kind))
    assert callable(locate(SHORT_NAMES[kind][1][name]["_target_"]))


def test_a_short_name_passes_the_keys_its_class_takes_and_its_fixed_arguments():
    block = {"name": "sgd", "lr": 0.5, "weight_decay": 0.0, "schedule": "linear"}
    opt = instantiate(block, "model.optimizer", "optimizer",
                      params=[torch.nn.Parameter(torch.ones(1))])
    assert isinstance(opt, torch.optim.SGD) and opt.defaults["momentum"] == 0.9
    assert opt.defaults["lr"] == 0.5  # schedule: not an SGD argument, left out


def test_an_unknown_short_name_lists_the_names_and_the_target_alternative():
    with pytest.raises(ValueError, match=r"model\.optimizer\.name='lion'.*'adamw'.*_target_"):
        instantiate({"name": "lion"}, "model.optimizer", "optimizer")


def test_a_target_block_passes_every_key_and_the_context_its_target_takes():
    made = instantiate({"_target_": HERE, "factor": 3}, "pooler", "pooler", hidden_size=8,
                       params=None)
    assert (made.hidden_size, made.factor) == (8, 3)  # params: not taken, not passed


def test_a_target_block_key_the_target_does_not_take_is_an_error_naming_the_block():
    with pytest.raises(TypeError, match=r"model\.towers\.pooler \(_target_ .*Scaled\).*width"):
        instantiate({"_target_": HERE, "factor": 3, "width": 2}, "model.towers.pooler",
                    hidden_size=8)


def test_a_target_block_is_whole_a_short_name_key_in_it_is_an_error():
    with pytest.raises(TypeError, match=r"pooler \(_target_ .*Scaled\).*'type'"):
        instantiate({"_target_": HERE, "type": "mean", "factor": 1}, "pooler", "pooler",
                    hidden_size=2)


def test_the_builders_keys_are_not_arguments():
    block = {"_target_": "torch.optim.SGD", "lr": 0.5, "momentum": 0.0,
             **dict.fromkeys(BUILDER_KEYS["optimizer"], 0)}
    opt = instantiate(block, "model.optimizer", "optimizer",
                      params=[torch.nn.Parameter(torch.ones(1))])
    assert opt.defaults["lr"] == 0.5


def test_resolve_writes_the_target_the_fixed_arguments_and_the_keys_the_class_takes():
    block = {"type": "gru", "hidden_size": 8, "num_heads": 12, "pretrained": "minilm",
             "dropout": "${model.dropout}"}
    assert resolve(block, "model.towers.encoder", "encoder") == {
        "_target_": "retrieval_qa.encoders.recurrent_encoder.RecurrentTokenEncoder",
        "kind": "gru", "hidden_size": 8, "pretrained": "minilm", "dropout": "${model.dropout}"}
    named = {"_target_": HERE, "factor": 1}
    assert resolve(named, "pooler", "pooler") == named
    with pytest.raises(UnknownKeyError, match=r"model\.towers\.encoder: unknown key.*'hidden'"):
        resolve({"type": "gru", "hidden": 8}, "model.towers.encoder", "encoder")


def test_resolve_blocks_resolves_composed_places_in_place():
    """Interpolations stay as written (a block that interpolates another follows it), a flat
    short name gathers its settings into its block, and blocks without a short name (a dual
    encoder's loss) are left as they are."""
    cfg = OmegaConf.create({"model": {
        "towers": {"pooler": {"type": "mean", "hops": 4}},
        "cross": {"pooler": "${model.towers.pooler}"},
        "loss": {"similarity": "dot"}, "refiner": "fcrr", "sf": 1.0, "dropout": 0.1,
        "fc_hidden": None, "conv_filters": 8, "sides": "question"}})
    assert resolve_blocks(cfg) == {"model.towers.pooler": "type: mean",
                                   "model.refiner": "refiner: fcrr"}
    assert OmegaConf.to_container(cfg.model.towers.pooler) == {
        "_target_": "retrieval_qa.encoders.poolers.MeanPooler"}
    assert OmegaConf.is_interpolation(cfg.model.cross, "pooler")
    assert cfg.model.cross.pooler._target_.endswith("MeanPooler")
    assert OmegaConf.to_container(cfg.model.refiner) == {
        "_target_": "retrieval_qa.encoders.residual.FCRR", "sf": 1.0, "dropout": 0.1,
        "fc_hidden": None}
    assert "sf" not in cfg.model and cfg.model.sides == "question"
    assert cfg.model.loss == {"similarity": "dot"}
    again = OmegaConf.to_container(cfg)
    assert resolve_blocks(cfg) == {} and OmegaConf.to_container(cfg) == again


def test_a_value_error_of_the_target_names_the_block():
    with pytest.raises(ValueError, match=r"pooler \(_target_ .*MultiHop.*\): combine='sum'"):
        instantiate({"type": "multihop_attention", "hops": 2, "attention_dim": 3,
                     "combine": "sum"}, "pooler", "pooler", hidden_size=4)


@pytest.mark.parametrize("target", sorted({b["_target_"] for _, names in SHORT_NAMES.values()
                                           for b in names.values()}))
def test_parameters_read_from_the_source_are_those_inspect_gives(target):
    """Composition reads a short name's parameters from its source (no torch imported for
    ``rqa train --cfg``): the same as inspecting the imported class."""
    import inspect

    from retrieval_qa.registry import _source_parameters

    params = inspect.signature(locate(target)).parameters.values()
    assert _source_parameters(target) == (
        frozenset(p.name for p in params),
        frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                       p.KEYWORD_ONLY)),
        any(p.kind is p.VAR_KEYWORD for p in params))
