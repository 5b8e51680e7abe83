"""Objects by configuration: a config node's ``_target_`` names the callable
(``package.module.Name``) and the other keys are its keyword arguments.

A method is a LightningModule class with the contract of :class:`~.models.method.Method`;
``rqa train`` reads ``model._target_`` and never names a concrete method, so a new method is
a module file plus a config file (``conf/model/NAME.yaml`` with its ``_target_``). The parts
of a method and of a run are built the same way, each from its own block: token encoders
(``model.towers.encoder``), poolers (``model.towers.pooler``), optimisers
(``model.optimizer``), VAE decoders (``model.decoder``), the residual refiner and loss
(``model.refiner``, ``model.loss``), the Trainer's callbacks (``trainer.callbacks.*``) and
the experiment logger (``logger``). A new one is a module file and a block that names it in
``_target_``; nothing lists it. Modules outside the package are found on ``sys.path``.

Short names. Blocks may name their class by a short name (``type: gru``, ``name: adamw``),
as conf/ and the configs of earlier runs and exports do: :data:`SHORT_NAMES` is the one table
that turns those into targets. Composition resolves them (:func:`resolve_blocks`), so a
composed config holds each such block as its ``_target_`` with the arguments the class takes
(the keys its short name fixes included); the block's other keys, settings of the kind's other
classes (a GRU's ``num_heads``), are left out. :func:`instantiate` still reads a short name, for
configs written before."""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from .errors import UnknownKeyError

_ENCODERS = "retrieval_qa.encoders"

#: kind -> (the key that holds a block's short name, {short name: the block it stands for:
#: its ``_target_`` and fixed arguments}). Only the names that configs and saved exports use;
#: a new class is named by its ``_target_``, not added here.
SHORT_NAMES: dict[str, tuple[str, dict[str, dict[str, Any]]]] = {
    "encoder": ("type", {
        "pretrained": {"_target_": f"{_ENCODERS}.pretrained_encoder.PretrainedTokenEncoder"},
        **{kind: {"_target_": f"{_ENCODERS}.recurrent_encoder.RecurrentTokenEncoder",
                  "kind": kind} for kind in ("gru", "lstm", "rnn")},
        "transformer": {"_target_": f"{_ENCODERS}.transformer_encoder.TransformerTokenEncoder"},
    }),
    "pooler": ("type", {
        "multihop_attention": {"_target_": f"{_ENCODERS}.poolers.MultiHopSelfAttentionPooler"},
        "mean": {"_target_": f"{_ENCODERS}.poolers.MeanPooler"},
        "cls": {"_target_": f"{_ENCODERS}.poolers.ClsPooler"},
    }),
    "optimizer": ("name", {  # fused kernels: one pass over all parameters (CPU and CUDA)
        "adamw": {"_target_": "torch.optim.AdamW", "fused": True},
        "adam": {"_target_": "torch.optim.Adam", "fused": True},
        "adafactor": {"_target_": "torch.optim.Adafactor"},
        "sgd": {"_target_": "torch.optim.SGD", "momentum": 0.9},
    }),
    "logger": ("name", {
        "csv": {"_target_": "retrieval_qa.training.loggers.csv_logger"},
        "wandb": {"_target_": "retrieval_qa.training.loggers.wandb_logger"},
        "none": {"_target_": "retrieval_qa.training.loggers.no_logger"},
    }),
    "decoder": ("type", {
        "gru": {"_target_": f"{_ENCODERS}.vae_decoders.GRUDecoder"},
        "mlp": {"_target_": f"{_ENCODERS}.vae_decoders.MLPDecoder"},
    }),
    "loss": ("name", {  # the residual refiners' losses (conf/model/residual.yaml)
        "triplet": {"_target_": "retrieval_qa.losses.triplet.BatchHardTripletLoss"},
        "quadratic_conditional": {
            "_target_": "retrieval_qa.losses.quadratic_conditional.QuadraticConditionalLoss"},
    }),
    "refiner": ("refiner", {
        "fcrr": {"_target_": f"{_ENCODERS}.residual.FCRR"},
        "convrr": {"_target_": f"{_ENCODERS}.residual.ConvRR"},
        "fcrr_convrr": {"_target_": f"{_ENCODERS}.residual.FCRRConvRR"},
    }),
    "retriever": ("kind", {  # a pipeline's first stages (conf/pipeline)
        "bm25": {"_target_": "retrieval_qa.pipeline.retrievers.BM25Retriever"},
        "dual_encoder": {"_target_": "retrieval_qa.pipeline.retrievers.DenseRetriever"},
    }),
    "reranker": ("kind", {
        "cross_encoder": {"_target_": "retrieval_qa.pipeline.rerankers.CrossEncoderStage"},
    }),
}

#: kind -> the keys of its blocks that the code building the block reads itself (they are
#: not arguments of the class, whatever names it): a token encoder's embedding table and
#: tower settings (retrieval_qa/encoders/builders.py), an optimiser's schedule
#: (retrieval_qa/models/optim.py), a decoder's output vocabulary (retrieval_qa/models/vae.py).
BUILDER_KEYS: dict[str, tuple[str, ...]] = {
    "encoder": ("pretrained", "fallback", "freeze_embeddings", "vocab_size", "embedding_dim",
                "padding_idx", "chunk_rows", "input_types"),
    "optimizer": ("schedule", "warmup_steps", "warmup_ratio"),
    "decoder": ("output_vocab",),
}

#: kinds whose short name is a value of the block that holds their settings beside it, not
#: a block of its own: conf/model/residual.yaml's ``refiner: fcrr`` with ``sf``, ``dropout``,
#: ... at the model's level. Resolved, the settings move into the kind's block.
FLAT_SETTINGS: dict[str, tuple[str, ...]] = {
    "refiner": ("sf", "dropout", "fc_hidden", "conv_filters", "conv_window", "conv_stride"),
}

#: where a composed config holds blocks that may be named by a short name, and their kind
#: (a place that a config lacks, or whose block has neither ``_target_`` nor the kind's
#: short-name key, e.g. a dual encoder's ``model.loss``, is not one)
PLACES: dict[str, str] = {
    "model.towers.encoder": "encoder", "model.towers.pooler": "pooler",
    "model.cross.encoder": "encoder", "model.cross.pooler": "pooler",
    "model.optimizer": "optimizer", "model.decoder": "decoder", "model.loss": "loss",
    "model.refiner": "refiner", "logger": "logger",
}


def locate(target: str) -> Any:
    """The object named ``package.module.attr``, with an error that says what is missing.

    Args:
        target: its dotted path (a block's ``_target_``), e.g. ``torch.optim.AdamW``.
    """
    module_name, _, attr = target.rpartition(".")
    if not module_name:
        raise ValueError(f"_target_={target!r}: expected a dotted path package.module.Name")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise ImportError(f"_target_={target!r}: cannot import {module_name!r} ({e}); is its "
                          "folder on PYTHONPATH?") from e
    try:
        return getattr(module, attr)
    except AttributeError as e:
        raise ImportError(f"_target_={target!r}: {module_name} has no {attr!r}") from e


def config_values(cfg: DictConfig | Mapping) -> dict:
    """A config node as a plain dict, interpolations resolved, ``_target_`` removed.

    Args:
        cfg: the node (a DictConfig, converted; a mapping, copied one level deep).
    """
    values = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) \
        else dict(cfg)
    values.pop("_target_", None)
    return values


def _short_name(cfg: DictConfig | Mapping, where: str, kind: str
                ) -> tuple[str, dict[str, Any]]:
    """(the short-name key, the block the short name stands for) of a block without
    ``_target_``."""
    key, names = SHORT_NAMES[kind]
    name = cfg.get(key)
    if name not in names:
        raise ValueError(f"{where}.{key}={name!r}; expected one of {list(names)}, or a "
                         f"_target_ naming the {kind} (package.module.Name)")
    return key, names[name]


def target_of(cfg: DictConfig | Mapping, where: str, kind: str | None = None) -> Any:
    """What ``cfg`` builds (imported): its ``_target_``, else its short name's target.

    Args:
        cfg: the block.
        where: the block's place, named in errors (e.g. ``model.towers.encoder``).
        kind: the :data:`SHORT_NAMES` kind of a block named by a short name; None: no short name.
    """
    target = cfg.get("_target_")
    if not target and kind is not None:
        target = _short_name(cfg, where, kind)[1]["_target_"]
    if not target:
        raise KeyError(f"{where} has no _target_ (the class to build, package.module.Name)")
    return locate(target)


def takes(target: Any, name: str) -> bool:
    """Whether ``target`` has a keyword parameter ``name`` (or ``**kwargs``).

    Args:
        target: a callable (a class: its constructor's); True if its signature is unreadable.
        name: the parameter's name.
    """
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):  # no signature to read: let the call decide
        return True
    return any(p.kind is p.VAR_KEYWORD or (p.name == name and p.kind in (
        p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)) for p in parameters)


def _module_file(module_name: str) -> Path | None:
    """The source file of ``module_name``, found without importing it or its packages (a
    top-level package's spec imports nothing); None: not a plain source file."""
    top, *rest = module_name.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return Path(spec.origin) if spec is not None and not rest and spec.origin else None
    folder = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest)
    for path in (folder.with_suffix(".py"), folder / "__init__.py"):
        if path.is_file():
            return path
    return None


def _def_in_source(module_name: str, attr: str, hops: int = 2) -> ast.AST | None:
    """The undecorated ``def``/``class`` ``attr`` of ``module_name``'s source, following a
    ``from X import attr`` re-export (``torch.optim.AdamW``) up to ``hops`` times."""
    path = _module_file(module_name)
    if path is None:
        return None
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == attr:
            return None if node.decorator_list else node
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and hops and any(
                a.name == attr and a.asname in (None, attr) for a in node.names):
            package = module_name if path.name == "__init__.py" else module_name.rpartition(".")[0]
            source = importlib.util.resolve_name("." * node.level + (node.module or ""),
                                                 package) if node.level else node.module
            return _def_in_source(source, attr, hops - 1)
    return None


@functools.cache
def _source_parameters(target: str) -> tuple[frozenset[str], frozenset[str], bool] | None:
    """(every parameter name, those a keyword can pass, whether it takes ``**kwargs``) of
    the callable ``target`` names, read from its source with ast, so that composing a config
    (``rqa train --cfg``, ``rqa sweep --dry-run``) imports no torch or Lightning; None when
    the source does not say (no source file, a decorated definition, a class without its own
    ``__init__``): the target is then imported and inspected."""
    module_name, _, attr = target.rpartition(".")
    node = _def_in_source(module_name, attr)
    if isinstance(node, ast.ClassDef):
        node = next((n for n in node.body if isinstance(n, ast.FunctionDef)
                     and n.name == "__init__" and not n.decorator_list), None)
        skip = 1  # self
    else:
        skip = 0
    if node is None:
        return None
    a = node.args
    positional = [x.arg for x in [*a.posonlyargs, *a.args]][skip:]
    keyword = [x.arg for x in a.args][max(0, skip - len(a.posonlyargs)):] + \
        [x.arg for x in a.kwonlyargs]
    extra = [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return (frozenset([*positional, *keyword, *extra]), frozenset(keyword), a.kwarg is not None)


def parameters_of(target: str) -> tuple[frozenset[str], frozenset[str], bool]:
    """(every parameter name, the keyword-passable ones, takes ``**kwargs``) of a callable:
    inspected when its module is imported already, else read from its source
    (:func:`_source_parameters`), else imported and inspected.

    Args:
        target: its dotted path ``package.module.Name`` (a class: its ``__init__``'s).
    """
    module_name = target.rpartition(".")[0]
    found = None if module_name in sys.modules else _source_parameters(target)
    if found is not None:
        return found
    try:
        params = inspect.signature(locate(target)).parameters.values()
    except (TypeError, ValueError):  # no signature to read: let the call decide
        return frozenset(), frozenset(), True
    return (frozenset(p.name for p in params),
            frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                           p.KEYWORD_ONLY)),
            any(p.kind is p.VAR_KEYWORD for p in params))


@functools.cache
def _kind_arguments(kind: str) -> frozenset[str]:
    """The parameters of every class that a short name of ``kind`` names."""
    out: set[str] = set()
    for named in SHORT_NAMES[kind][1].values():
        out.update(parameters_of(named["_target_"])[0])
    return frozenset(out)


def resolve(cfg: DictConfig | Mapping, where: str, kind: str) -> dict:
    """A block named by a short name as the block of its ``_target_`` (a plain dict,
    interpolations as written): the target, the arguments its short name fixes, and of the
    block's keys those the class takes and those its builder reads (:data:`BUILDER_KEYS`);
    the settings of the kind's other classes are left out (a GRU takes no ``num_heads``), a
    key that no class of the kind takes is an :class:`UnknownKeyError`.

    Args:
        cfg: the block; one with a ``_target_`` is returned as it is (a plain dict).
        where: the block's place, named in errors.
        kind: its kind, a key of :data:`SHORT_NAMES`.
    """
    block = OmegaConf.to_container(cfg, resolve=False) if isinstance(cfg, DictConfig) \
        else dict(cfg)
    if block.get("_target_"):
        return block
    key, named = _short_name(block, where, kind)
    builder = BUILDER_KEYS.get(kind, ())
    _, keywords, any_keyword = parameters_of(named["_target_"])  # nothing imported if it can
    unknown = sorted(k for k in block if k != key and k not in builder
                     and k not in _kind_arguments(kind))
    if unknown:
        raise UnknownKeyError(f"{where}: unknown key(s) {unknown}; no {kind} of "
                              f"{list(SHORT_NAMES[kind][1])} takes them (fix: check the "
                              "spelling, or name the class that does in _target_)")
    return {**named, **{k: v for k, v in block.items() if k != key and k not in named
                        and (k in builder or any_keyword or k in keywords)}}


def require_keys(block: Mapping, keys: Iterable[str], where: str) -> None:
    """An :class:`UnknownKeyError` naming the first of ``keys`` that ``block`` lacks: every
    setting comes with the composed config (conf/ holds them all), none is filled in.

    Args:
        block: the settings.
        keys: the keys it must have.
        where: the block's place, named in the error.
    """
    for key in keys:
        if key not in block:
            raise UnknownKeyError(f"{where} has no {key!r} (fix: give {where}.{key}; a config "
                                  "composed from conf/ holds every key, e.g. rqa train --cfg)")


def _flat_block(parent: DictConfig, leaf: str, kind: str) -> Any:
    """The block of a flat kind (:data:`FLAT_SETTINGS`): its short name with its settings,
    which leave ``parent`` (a block with a ``_target_`` takes none of them)."""
    raw = OmegaConf.to_container(parent, resolve=False)
    settings = {k: raw[k] for k in FLAT_SETTINGS[kind] if k in raw}
    with open_dict(parent):
        for key in settings:
            del parent[key]
    node = parent[leaf]
    return node if isinstance(node, DictConfig) else {SHORT_NAMES[kind][0]: raw[leaf],
                                                      **settings}


def resolve_blocks(cfg: DictConfig) -> dict[str, str]:
    """Resolve, in place, the short names of the blocks at :data:`PLACES` (see the module
    docstring); a block that interpolates another (``${model.towers.encoder}``) follows it.
    Returns ``{place: "key: short name"}`` of the blocks it resolved.

    Args:
        cfg: the composed config, changed in place.
    """
    resolved = {}
    for place, kind in PLACES.items():
        parent_path, _, leaf = place.rpartition(".")
        parent = OmegaConf.select(cfg, parent_path) if parent_path else cfg
        if not isinstance(parent, DictConfig) or leaf not in parent \
                or OmegaConf.is_interpolation(parent, leaf):
            continue
        block = _flat_block(parent, leaf, kind) if kind in FLAT_SETTINGS else parent[leaf]
        key = SHORT_NAMES[kind][0]
        if not isinstance(block, (DictConfig, dict)) or block.get("_target_") \
                or key not in block:
            continue
        with open_dict(parent):
            parent[leaf] = resolve(block, place, kind)
        resolved[place] = f"{key}: {block[key]}"
    return resolved


def instantiate(cfg: DictConfig | Mapping, where: str, kind: str | None = None,
                **context) -> Any:
    """The object a config block describes: ``target(**keys, **context)``.

    Every key of the block is an argument (a key the target does not take is an error naming
    the block), except the keys that the kind's builder reads itself (:data:`BUILDER_KEYS`).

    Args:
        cfg: the block: ``_target_`` (or ``kind``'s short name: :func:`resolve`) and arguments.
        where: the block's place, named in errors (e.g. ``model.optimizer``).
        kind: the :data:`SHORT_NAMES` kind of a block named by a short name; None: no short name.
        **context: what the caller supplies (a pooler's ``hidden_size``, an optimiser's
            ``params``, the run's folder), given to a target that takes it (over the block).
    """
    target = target_of(cfg, where, kind)
    values = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) \
        else dict(cfg)
    if kind is not None:
        values = resolve(values, where, kind)
        for key in BUILDER_KEYS.get(kind, ()):
            values.pop(key, None)
    values.pop("_target_", None)
    kwargs = {**values, **{k: v for k, v in context.items() if takes(target, k)}}
    try:
        return target(**kwargs)
    except (TypeError, ValueError) as e:  # a wrong key or value: say which block holds it
        if type(e) not in (TypeError, ValueError):
            raise
        name = f"{target.__module__}.{getattr(target, '__qualname__', repr(target))}"
        keys = f"; keys given: {sorted(kwargs)}" if isinstance(e, TypeError) else ""
        raise type(e)(f"{where} (_target_ {name}): {e}{keys}") from e
