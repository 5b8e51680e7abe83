"""conf/ is the one source of every setting: no constructor or builder keeps a default for a
parameter whose value a conf block gives (two copies of a value drift apart; some did)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from retrieval_qa.registry import locate

CONF = Path(__file__).resolve().parents[1] / "conf"


def _target_blocks(node, where: str):
    """Every mapping with a ``_target_`` in a YAML tree, with where it is."""
    if isinstance(node, dict):
        if isinstance(node.get("_target_"), str):
            yield where, node
        for key, value in node.items():
            yield from _target_blocks(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _target_blocks(value, f"{where}[{i}]")


def _blocks() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(CONF.rglob("*.yaml")):
        tree = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        out += list(_target_blocks(tree, str(path.relative_to(CONF.parent))))
    return out


def _doubled(fn, keys) -> list[str]:
    """The parameters of ``fn`` that have a default and are also among ``keys``."""
    signature = inspect.signature(fn.__init__ if inspect.isclass(fn) else fn)
    return [name for name, p in signature.parameters.items()
            if name in keys and p.default is not inspect.Parameter.empty]


def _conf_block(relative: str, *path: str) -> dict:
    node = OmegaConf.to_container(OmegaConf.load(CONF / relative), resolve=False)
    for key in path:
        node = node[key]
    return node


def _builders():
    """What conf blocks feed without a ``_target_``: (the callable, its block, where)."""
    from retrieval_qa.encoders.poolers import MultiHopSelfAttentionPooler
    from retrieval_qa.evaluation.evaluator import evaluate
    from retrieval_qa.evaluation.rank_metrics import ReQARankMetric
    from retrieval_qa.losses import InBatchSoftmaxLoss

    return [
        (MultiHopSelfAttentionPooler, _conf_block("model/dual_encoder.yaml", "towers", "pooler"),
         "conf/model/dual_encoder.yaml towers.pooler"),
        (InBatchSoftmaxLoss, _conf_block("model/dual_encoder.yaml", "loss"),
         "conf/model/dual_encoder.yaml loss"),
        (evaluate, _conf_block("eval/default.yaml"), "conf/eval/default.yaml"),
        (ReQARankMetric, _conf_block("eval/default.yaml"), "conf/eval/default.yaml"),
    ]


def test_there_are_blocks_to_check():
    targets = {block["_target_"] for _, block in _blocks()}
    assert "retrieval_qa.data.datamodule.ReQADataModule" in targets
    assert "retrieval_qa.models.residual.ResidualRefinementModule" in targets


@pytest.mark.parametrize(("where", "block"), _blocks(), ids=lambda x: x if isinstance(x, str)
                         else None)
def test_a_target_keeps_no_default_that_its_conf_block_gives(where, block):
    doubled = _doubled(locate(block["_target_"]), set(block) - {"_target_"})
    assert not doubled, (f"{where}: {block['_target_']} has defaults for {doubled}, which the "
                         "block gives: make them required (conf is their one source)")


def test_a_builder_keeps_no_default_that_its_conf_block_gives():
    found = {where: _doubled(fn, set(block)) for fn, block, where in _builders()}
    assert not {w: d for w, d in found.items() if d}, found


def test_the_check_sees_a_doubled_default():
    def builder(a, *, b: int = 1, c: int = 2) -> None: ...

    assert _doubled(builder, {"b", "d"}) == ["b"]
