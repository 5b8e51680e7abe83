"""One registry builds every block: ``_target_`` or a short name of SHORT_NAMES, the block's
keys as arguments (a ``_target_`` block's all of them; a short-named block's those its class
takes), and the caller's context where the target takes it."""

from __future__ import annotations

import pytest
import torch

from retrieval_qa.registry import SHORT_NAMES, instantiate, locate, target_of


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


def test_shared_keys_reach_only_targets_that_take_them():
    made = instantiate({"_target_": HERE, "factor": 2, "hops": 4}, "pooler",
                       shared={"hops", "factor"}, hidden_size=1)
    assert made.factor == 2


def test_a_target_wins_over_a_short_name():
    made = instantiate({"_target_": HERE, "type": "mean", "factor": 1}, "pooler", "pooler",
                       shared={"type"}, hidden_size=2)
    assert isinstance(made, Scaled)


def test_a_value_error_of_the_target_names_the_block():
    with pytest.raises(ValueError, match=r"pooler \(_target_ .*MultiHop.*\): combine='sum'"):
        instantiate({"type": "multihop_attention", "hops": 2, "attention_dim": 3,
                     "combine": "sum"}, "pooler", "pooler", hidden_size=4)
