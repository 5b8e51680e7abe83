"""Where each value of a composed config came from (``rqa train --cfg``): conf/train.yaml, a
group file (or a parent it ``extends:``), the experiment file (or a parent it ``extends:``),
the profile (the experiment's ``profiles.<name>`` block, or a shared conf/profile file it
``extends:``), or the command line. The layers are replayed in the order
:func:`~.compose.compose_traced` merges them; the last one that sets a key (or a node above
it) is its source."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import yaml
from omegaconf import DictConfig, OmegaConf

from ..config import load_yaml
from ..registry import FLAT_SETTINGS, PLACES

__all__ = ["annotated_yaml", "layer_keys", "leaves", "override_keys", "resolve_sources",
           "value_sources"]

COMMAND_LINE = "command line"


def _chain(group: str, name: str) -> list[tuple[str, DictConfig]]:
    """conf/<group>/<name>.yaml and the files it ``extends:``, the root parent first."""
    out: list[tuple[str, DictConfig]] = []
    seen: set[str] = set()
    while name and name not in seen:
        seen.add(name)
        node = load_yaml(f"{group}/{name}.yaml")
        out.append((name, node))
        name = node.get("extends")
    return out[::-1]


def leaves(node, prefix: str = ""):
    """(dotted key, value) of every leaf of a config (or of its plain container); lists and
    empty mappings are leaves."""
    if isinstance(node, DictConfig):
        node = OmegaConf.to_container(node, resolve=False)
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from leaves(value, f"{prefix}{key}.")
    else:
        yield prefix[:-1], node


def layer_keys(node: DictConfig, prefix: str = "", skip: Sequence[str] = ()) -> list[str]:
    """The dotted keys a config file sets (under ``prefix``), its top-level ``skip`` keys
    left out: one layer of :func:`resolve_sources`."""
    return [prefix + key for key, _ in leaves(node)
            if key.split(".", 1)[0] not in skip]


def override_keys(overrides: Sequence[str]) -> list[str]:
    """The dotted keys that ``key=value`` overrides set; a mapping value merges into its node
    (the keys it names), as :func:`~retrieval_qa.config.apply_overrides` merges it."""
    return [k for o in overrides for k in layer_keys(OmegaConf.from_dotlist([o]))]


def _layers(cfg: DictConfig, overrides: Sequence[str]) -> list[tuple[str, list[str]]]:
    picks = {k: v for k, v in (o.split("=", 1) for o in overrides if "=" in o)}
    experiment = str(cfg.experiment)
    experiments = _chain("experiment", experiment)
    base = load_yaml("train.yaml")
    groups = dict(base.get("defaults", {}))
    for _, node in experiments:
        groups.update(node.get("defaults", {}))
    groups.update({g: picks[g] for g in groups if g in picks})
    layers = [("conf/train.yaml", layer_keys(base, skip=("defaults",)))]
    for group, name in groups.items():
        if name is None:
            continue  # given whole by the experiment file
        for file, node in _chain(group, str(name)):
            where = f"conf/{group}/{file}.yaml"
            if file != name:
                where += f" (extended by conf/{group}/{name}.yaml)"
            layers.append((where, layer_keys(node, f"{group}.", skip=("extends",))))
    for file, node in experiments:
        where = f"conf/experiment/{file}.yaml"
        if file != experiment:
            where += f" (extended by conf/experiment/{experiment}.yaml)"
        layers.append((where, layer_keys(node, skip=("extends", "defaults", "profiles"))))
    if cfg.profile != "paper":
        for file, node in experiments:
            block = node.get("profiles", {}).get(cfg.profile)
            if block is None:
                continue
            where = f"profile {cfg.profile} (conf/experiment/{file}.yaml)"
            shared = block.get("extends")
            for name in [shared] if isinstance(shared, str) else list(shared or []):
                layers.append((f"conf/profile/{name}.yaml ({where} extends it)",
                               layer_keys(load_yaml(f"profile/{name}.yaml"))))
            layers.append((where, layer_keys(block, skip=("extends",))))
    given = [o for o in overrides if "=" in o and o.split("=", 1)[0] not in groups]
    layers.append((COMMAND_LINE, override_keys(given)))
    return layers


def value_sources(cfg: DictConfig, overrides: Sequence[str],
                  resolved: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each dotted key of ``cfg`` with the last layer that set it (see the module docstring).
    ``resolved``: ``{place: "key: short name"}`` of the blocks whose short name composition
    resolved (:func:`~retrieval_qa.registry.resolve_blocks`); the keys it added name the short
    name, and the settings it moved into a block (a refiner's ``sf``) keep the source of their
    key."""
    return resolve_sources(cfg, _layers(cfg, overrides), resolved)


def resolve_sources(cfg: DictConfig, layers: Sequence[tuple[str, Sequence[str]]],
                    resolved: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each dotted key of ``cfg`` with the last of ``layers`` ((where, the keys it sets), in
    the order they were merged) that set it or a node above it; a layer that sets a list or
    an empty mapping sets everything under it. ``resolved``: as :func:`value_sources`."""
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
    by ``# <its source>``."""
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
