"""conf/ is the one source of every setting: no constructor, loss or builder that a config
reaches keeps a default for a setting that conf gives (two copies of a value drift apart; some
did). What is checked, on every composed config (each experiment x profile, short names
resolved to their ``_target_`` as composition writes them) and on every ``_target_`` block of
the conf/ files:

1. A block with a ``_target_`` defined in retrieval_qa: no parameter of its target that a key
   of the block names has a default. (Classes of other libraries, e.g. ``torch.optim.AdamW``,
   keep their own defaults; the block gives every argument it sets.)
2. A block without a ``_target_`` that a method turns into a constructor call (a loss block,
   the GAM block, the cross-attention block, ...; :data:`READ_BY`): the same rule for that
   constructor.
3. Every function, class and method of retrieval_qa.encoders, .losses and .models (where the
   methods' parts live, whatever names them): no parameter has a default equal to a value that
   a key of the same name takes in a composed config (``None`` included; ``True`` and ``1``
   differ, ``1`` and ``1.0`` do not). Such a default is a copy of a conf value."""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from retrieval_qa.registry import locate

CONF = Path(__file__).resolve().parents[1] / "conf"
SCANNED = ("retrieval_qa.encoders", "retrieval_qa.losses", "retrieval_qa.models")

#: blocks without a ``_target_`` and the constructor that reads them: (the model class whose
#: config holds them, or None for any), dotted path, the callable that takes the block's keys
READ_BY = [
    ("DualEncoderModule", "model.loss", "retrieval_qa.losses.InBatchSoftmaxLoss"),
    ("EndxModule", "model.loss", "retrieval_qa.losses.InBatchSoftmaxLoss"),
    ("EndxModule", "model.cross.cross_attention",
     "retrieval_qa.encoders.cross_attention_branch.CrossAttentionBranch"),
    ("EndxModule", "model.gam", "retrieval_qa.losses.gam.GeometryAlignmentLoss"),
    ("EndxModule", "model.weights", "retrieval_qa.models.endx_schedule.EndxLossWeights"),
    ("VAEModule", "model.loss.matching", "retrieval_qa.losses.matching.LatentMatchingLoss"),
    ("VAEModule", "model.loss.kl", "retrieval_qa.models.vae_schedule.KLAnnealing"),
    (None, "model.towers.projection", "retrieval_qa.encoders.projection.Projection"),
    (None, "eval", "retrieval_qa.evaluation.evaluator.evaluate"),
    (None, "eval", "retrieval_qa.evaluation.rank_metrics.ReQARankMetric"),
]


@functools.cache
def composed() -> dict[str, dict]:
    """Every experiment x profile, composed (short names resolved), as plain dicts."""
    from retrieval_qa.training.compose import compose, experiment_profiles

    return {f"{e}-{p}": OmegaConf.to_container(compose([f"experiment={e}", f"profile={p}"]),
                                               resolve=True)
            for e, profiles in experiment_profiles().items() for p in profiles}


def _target_blocks(node, where: str):
    """Every mapping with a ``_target_`` in a tree, with where it is."""
    if isinstance(node, dict):
        if isinstance(node.get("_target_"), str):
            yield where, node
        for key, value in node.items():
            yield from _target_blocks(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _target_blocks(value, f"{where}[{i}]")


def _file_blocks() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(CONF.rglob("*.yaml")):
        tree = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        out += list(_target_blocks(tree, str(path.relative_to(CONF.parent))))
    return out


def _composed_blocks() -> list[tuple[str, dict]]:
    return [(f"{name}: {where[1:]}", block) for name, cfg in composed().items()
            for where, block in _target_blocks(cfg, "")]


def _doubled(fn, keys) -> list[str]:
    """The parameters of ``fn`` that have a default and are also among ``keys``."""
    signature = inspect.signature(fn.__init__ if inspect.isclass(fn) else fn)
    return [name for name, p in signature.parameters.items()
            if name in keys and p.default is not inspect.Parameter.empty]


def _ours(target: str) -> bool:
    return target.startswith("retrieval_qa.")


def _select(cfg: dict, path: str):
    for key in path.split("."):
        if not isinstance(cfg, dict) or key not in cfg:
            return None
        cfg = cfg[key]
    return cfg


def test_there_are_blocks_to_check():
    targets = {block["_target_"] for _, block in _file_blocks() + _composed_blocks()}
    assert "retrieval_qa.data.datamodule.ReQADataModule" in targets
    assert "retrieval_qa.models.residual.ResidualRefinementModule" in targets
    # what composition resolves: encoders, poolers, decoders, refiners and losses by short name
    for name in ("RecurrentTokenEncoder", "PretrainedTokenEncoder", "TransformerTokenEncoder",
                 "MultiHopSelfAttentionPooler", "MeanPooler", "GRUDecoder", "MLPDecoder", "FCRR",
                 "ConvRR", "FCRRConvRR", "BatchHardTripletLoss", "csv_logger"):
        assert any(t.endswith("." + name) for t in targets), name


@pytest.mark.parametrize(("where", "block"), _file_blocks(),
                         ids=lambda x: x if isinstance(x, str) else None)
def test_a_target_keeps_no_default_that_its_conf_block_gives(where, block):
    doubled = _doubled(locate(block["_target_"]), set(block) - {"_target_"})
    assert not doubled, (f"{where}: {block['_target_']} has defaults for {doubled}, which the "
                         "block gives: make them required (conf is their one source)")


def test_every_composed_target_keeps_no_default_that_its_block_gives():
    found = {}
    for where, block in _composed_blocks():
        if _ours(block["_target_"]):
            doubled = _doubled(locate(block["_target_"]), set(block) - {"_target_"})
            if doubled:
                found[where] = (block["_target_"], doubled)
    assert not found, found


def test_the_blocks_methods_read_keep_no_default_in_their_constructors():
    found, checked = {}, set()
    for name, cfg in composed().items():
        model = str(cfg["model"].get("_target_", "")).rsplit(".", 1)[-1]
        for owner, path, target in READ_BY:
            block = _select(cfg, path)
            if (owner is None or owner == model) and isinstance(block, dict):
                checked.add((path, target))
                doubled = _doubled(locate(target), set(block))
                if doubled:
                    found[f"{name}: {path} -> {target}"] = doubled
    assert checked == {(path, target) for _, path, target in READ_BY}  # each one seen
    assert not found, found


def _conf_values() -> dict[str, list]:
    """Each key of the composed configs with the values it takes."""
    values: dict[str, list] = {}

    def walk(node):
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value)
            elif not isinstance(value, list) and value not in values.setdefault(key, []):
                values[key].append(value)

    for cfg in composed().values():
        walk(cfg)
    return values


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _callables(package: str):
    """(qualified name, callable) of every function, class and method defined in ``package``."""
    module = importlib.import_module(package)
    names = [package, *(m.name for m in pkgutil.walk_packages(module.__path__, package + "."))]
    for name in names:
        mod = importlib.import_module(name)
        for attr, obj in vars(mod).items():
            if getattr(obj, "__module__", None) != name:
                continue
            if inspect.isfunction(obj):
                yield f"{name}.{attr}", obj
            elif inspect.isclass(obj):
                for method, fn in vars(obj).items():
                    fn = getattr(fn, "__func__", fn)
                    if inspect.isfunction(fn):
                        yield f"{name}.{attr}.{method}", fn
                if "__init__" not in vars(obj) and hasattr(obj, "__dataclass_fields__"):
                    yield f"{name}.{attr}", obj  # a dataclass's generated signature


def _copied_defaults(fn, values: dict[str, list]) -> list[str]:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [f"{p.name}={p.default!r}" for p in parameters
            if p.default is not inspect.Parameter.empty and p.name in values
            and any(_same(p.default, v) for v in values[p.name])]


@pytest.mark.parametrize("package", SCANNED)
def test_no_default_in_the_methods_parts_copies_a_conf_value(package):
    values = _conf_values()
    found = {where: copied for where, fn in _callables(package)
             if (copied := _copied_defaults(fn, values))}
    assert not found, (f"defaults equal to a value conf gives the key of that name: {found} "
                       "(make them required; the composed config passes them down)")


def test_the_checks_see_a_doubled_or_copied_default():
    def builder(a, *, b: int = 1, c: int = 2, d: float = 1.0, e=None, f=True) -> None: ...

    assert _doubled(builder, {"b", "d"}) == ["b", "d"]
    values = {"b": [1.0], "c": [True], "e": [None], "f": [1], "d": [2.0]}
    assert _copied_defaults(builder, values) == ["b=1", "e=None"]
