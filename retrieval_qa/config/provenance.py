"""Where each value of a composed config came from (``rqa train --cfg``, ``rqa evaluate
--pipeline NAME --cfg``): conf/train.yaml, a group file (or a parent it ``extends:``), the
experiment file (or a parent it ``extends:``), the profile (the experiment's
``profiles.<name>`` block, or a shared conf/profile file it ``extends:``), a pipeline's files,
or the command line. A composition records each layer it merges, with the keys that layer
sets, as it merges it (:class:`~.merge.Composition`); the last layer that sets a key (or a
node above it) is its source. No file is read again to say so."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import yaml
from omegaconf import DictConfig, OmegaConf

from ..registry import FLAT_SETTINGS, PLACES

__all__ = ["COMMAND_LINE", "annotated_yaml", "layer_keys", "leaves", "override_keys",
           "resolve_sources"]

#: the source of a value set by a ``key=value`` setting
COMMAND_LINE = "command line"


def leaves(node, prefix: str = ""):
    """(dotted key, value) of every leaf of a config (or of its plain container); lists and
    empty mappings are leaves.

    Args:
        node: a config, or its plain container.
        prefix: the dotted key of ``node``, with its trailing dot.
    """
    if isinstance(node, DictConfig):
        node = OmegaConf.to_container(node, resolve=False)
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from leaves(value, f"{prefix}{key}.")
    else:
        yield prefix[:-1], node


def layer_keys(node: DictConfig, prefix: str = "", skip: Sequence[str] = ()) -> list[str]:
    """The dotted keys a config file sets (under ``prefix``), its top-level ``skip`` keys
    left out: one layer of :func:`resolve_sources`.

    Args:
        node: the file's settings.
        prefix: the dotted key the file's settings go under (``model.``), with its dot.
        skip: top-level keys that are not settings (``extends``, ``defaults``).
    """
    return [prefix + key for key, _ in leaves(node)
            if key.split(".", 1)[0] not in skip]


def override_keys(overrides: Sequence[str]) -> list[str]:
    """The dotted keys that ``key=value`` overrides set; a mapping value merges into its node
    (the keys it names), as :func:`~retrieval_qa.config.apply_overrides` merges it.

    Args:
        overrides: the ``key=value`` settings.
    """
    return [k for o in overrides for k in layer_keys(OmegaConf.from_dotlist([o]))]


def resolve_sources(cfg: DictConfig, layers: Sequence[tuple[str, Sequence[str]]],
                    resolved: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each dotted key of ``cfg`` with the last of ``layers`` ((where, the keys it sets), in
    the order they were merged) that set it or a node above it; a layer that sets a list or
    an empty mapping sets everything under it.

    Args:
        cfg: the composed config.
        layers: (where, the dotted keys it sets) of each layer, in the order merged.
        resolved: ``{place: "key: short name"}`` of the blocks whose short name composition
            resolved (:func:`~retrieval_qa.registry.resolve_blocks`); the keys it added name
            the short name, and the settings it moved into a block (a refiner's ``sf``) keep
            the source of their key.
    """
    found: dict[str, str] = {}
    for where, keys in layers:
        for key in keys:
            for old in [k for k in found if k.startswith(key + ".")]:
                del found[old]
            found[key] = where

    def source(key: str) -> str | None:
        parts = key.split(".")
        return next((found[k] for n in range(len(parts), 0, -1)
                     if (k := ".".join(parts[:n])) in found), None)

    out = {}
    for key, _ in leaves(cfg):
        where = source(key)
        place = next((p for p in resolved or {} if key.startswith(p + ".")), None)
        if place is not None and where is None:
            leaf = key[len(place) + 1:]
            if leaf in FLAT_SETTINGS.get(PLACES[place], ()):  # moved from beside the block
                where = source(f"{place.rpartition('.')[0]}.{leaf}".lstrip("."))
            where = where or f"the short name {resolved[place]} (retrieval_qa/registry.py)"
        if where is not None:
            out[key] = where
    return out


def annotated_yaml(cfg: DictConfig, sources: dict[str, str]) -> str:
    """``cfg`` as YAML (interpolations as written, one line per value), each value followed
    by ``# <its source>``.

    Args:
        cfg: the composed config.
        sources: each dotted key's source (:func:`resolve_sources`).
    """
    text = yaml.dump(OmegaConf.to_container(cfg, resolve=False), sort_keys=False,
                     allow_unicode=True, default_flow_style=False, width=1_000_000)
    lines, stack = [], []
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        if stripped.startswith("- ") or ":" not in stripped:
            lines.append(line)  # a list item: its key carries the note
            continue
        depth = (len(line) - len(stripped)) // 2
        stack[depth:] = [str(yaml.safe_load(stripped.split(": ", 1)[0].rstrip(":")))]
        note = sources.get(".".join(stack))
        lines.append(f"{line}  # {note}" if note else line)
    return "\n".join(lines) + "\n"
