"""Configuration: YAML files under ``conf/`` are the single source of every setting;
``key=value`` overrides from the command line must name existing keys.

A run's settings are composed once (:mod:`retrieval_qa.training.compose`) and passed down
whole: constructors take them as required arguments and keep no Python copy, so each setting
is written in exactly one place."""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, GrammarParseError

from .errors import InputFileError, OverrideError, UnknownKeyError, did_you_mean


def conf_dir() -> Path:
    return Path(os.environ.get("RQA_CONF_DIR") or Path(__file__).resolve().parents[1] / "conf")


def shown_path(path: str | Path) -> str:
    """A config path as a message names it: relative to the repository when inside it
    (``conf/model/bm25.yaml``, the same on every machine), else as it is (a folder of
    ``$RQA_CONF_PATH`` elsewhere is the user's own)."""
    root = Path(__file__).resolve().parents[1]
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except ValueError:
        return str(path)


def conf_dirs() -> list[Path]:
    """Where configs are looked up, first match wins: the folders of ``$RQA_CONF_PATH``
    (``os.pathsep``-separated; a project's own methods and experiments), then :func:`conf_dir`."""
    extra = [Path(d) for d in os.environ.get("RQA_CONF_PATH", "").split(os.pathsep) if d]
    return [*extra, conf_dir()]


def conf_names(group: str) -> list[str]:
    """The config names of a group (``experiment``, ``model``, ...) across :func:`conf_dirs`."""
    return sorted({p.stem for d in conf_dirs() for p in (d / group).glob("*.yaml")})


def load_yaml(relative: str) -> DictConfig:
    path = next((d / relative for d in conf_dirs() if (d / relative).is_file()), None)
    if path is None:
        group = Path(relative).parent.as_posix()
        names = conf_names(group)
        raise FileNotFoundError(f"config {relative} not found in "
                                f"{[shown_path(d) for d in conf_dirs()]}; "
                                f"{did_you_mean(Path(relative).stem, names)}available in "
                                f"{group}/: {names}")
    return load_yaml_file(path)


def yaml_error_line(error: yaml.YAMLError) -> str:
    """Where and what a YAML error is, in one line ("line 3, column 5: ...")."""
    mark = getattr(error, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    what = getattr(error, "problem", None) or str(error).splitlines()[0]
    context, start = getattr(error, "context", None), getattr(error, "context_mark", None)
    if context and start is not None:  # where the unfinished construct began
        what += f" ({context} from line {start.line + 1}, column {start.column + 1})"
    return where + what


def load_yaml_file(path: str | Path, what: str = "config file") -> DictConfig:
    """A YAML mapping as a DictConfig; a syntax error, or a file that is not a mapping, is an
    :class:`InputFileError` naming the file and the line."""
    try:
        cfg = OmegaConf.load(path)
    except yaml.YAMLError as e:
        raise InputFileError(what, shown_path(path), f"not valid YAML ({yaml_error_line(e)})",
                             "repair the YAML at that line") from e
    if not isinstance(cfg, DictConfig):
        raise InputFileError(what, shown_path(path), "not a YAML mapping (key: value lines)",
                             "write its settings as key: value")
    return cfg


def load_group(group: str, name: str) -> DictConfig:
    """conf/<group>/<name>.yaml; a file with ``extends: OTHER`` is merged over OTHER's (of the
    same group)."""
    return merge_extends(group, load_yaml(f"{group}/{name}.yaml"))


def merge_extends(group: str, cfg: DictConfig) -> DictConfig:
    """``cfg`` merged over ``conf/<group>/<OTHER>.yaml`` when it says ``extends: OTHER``."""
    parent = cfg.pop("extends", None)
    return OmegaConf.merge(load_group(group, parent), cfg) if parent else cfg


@functools.lru_cache(maxsize=32)
def _model_defaults(folders: tuple[str, ...], name: str) -> dict[str, Any]:
    del folders  # the cache key only: a later RQA_CONF_PATH or RQA_CONF_DIR is another search
    return OmegaConf.to_container(load_group("model", name), resolve=False)  # type: ignore[return-value]


def model_defaults(name: str) -> dict[str, Any]:
    """The settings of ``conf/model/<name>.yaml`` (with its ``extends:``) as a plain dict, for
    code that composes a model's settings outside ``rqa train`` (the cross classifier of
    ``rqa analyze bertqa``). Interpolations (``${model...}``) are left as written; read only
    sections that have none. A fresh copy on every call."""
    return copy.deepcopy(_model_defaults(tuple(str(d) for d in conf_dirs()), name))


def plain(cfg: Any) -> dict[str, Any]:
    """A plain dict from a dict, an OmegaConf DictConfig (interpolations resolved) or None."""
    if cfg is None:
        return {}
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    if isinstance(cfg, Mapping):
        return dict(cfg)
    raise TypeError(f"expected a dict or DictConfig, got {type(cfg).__name__}")


_ABSENT = object()


def _current(cfg: DictConfig, key: str):
    """The value an override of ``key`` replaces: ``_ABSENT`` when there is none (the merge
    then names the unknown key), None when any value fits (a null default, an
    interpolation)."""
    parent_key, _, leaf = key.rpartition(".")
    parent = OmegaConf.select(cfg, parent_key, throw_on_resolution_failure=False) \
        if parent_key else cfg
    if not isinstance(parent, DictConfig) or leaf not in parent:
        return _ABSENT
    if OmegaConf.is_interpolation(parent, leaf):
        return None
    return parent[leaf]


_PLURAL = {bool: "true/false values", int: "integers", float: "numbers", str: "strings"}


def _kind(value) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, (DictConfig, dict)):
        return "a mapping {key: value, ...}"
    if isinstance(value, (ListConfig, list)):
        return "a list [a, b, ...]"
    return "a string"


def _fits(current, value) -> bool:
    """Whether ``value`` (parsed as YAML) may replace ``current``: the type of the composed
    default is the key's type (an int takes an int, a float an int or a float, a string any
    scalar); null is allowed everywhere, and a null default takes anything."""
    if current is None or value is None:
        return True
    if isinstance(current, bool):
        return isinstance(value, bool)
    if isinstance(current, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(current, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(current, DictConfig):
        return isinstance(value, dict)
    if isinstance(current, ListConfig):  # and its items, when the default's share a type
        if not isinstance(value, list):
            return False
        kinds = {type(v) for v in current}
        if len(kinds) == 1 and kinds <= {bool, int, float, str}:
            return all(_fits(current[0], v) for v in value)
        return True
    return not isinstance(value, (dict, list))


def check_override(cfg: DictConfig, item: str,
                   words: Mapping[str, Sequence[str]] | None = None) -> None:
    """Raise :class:`OverrideError` when ``item`` (``key=value``) is not key=value, or its
    value has another type than the setting it replaces; an unknown key is left to the merge
    (which names it). ``words`` maps keys to the words they take besides their default's
    type (a pipeline's ``reranker.top_k: tune``)."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise OverrideError(item, key, "not key=value",
                            "write settings as key=value, e.g. trainer.max_steps=100")
    try:
        value = OmegaConf.to_container(OmegaConf.from_dotlist([f"v={raw}"]), resolve=False)["v"]
    except (yaml.YAMLError, GrammarParseError) as e:
        raise OverrideError(item, key, f"the value is not valid YAML ({str(e).splitlines()[0]})",
                            "quote or complete it, e.g. a list as [a, b] or a string as "
                            "'text'") from e
    if isinstance(value, str) and "${" in value:  # an interpolation: known when resolved
        return
    if value in (words or {}).get(key.strip(), ()):
        return
    current = _current(cfg, key)
    if current is _ABSENT or _fits(current, value):
        return
    got = f"got {_kind(value)} {value!r}"
    if isinstance(current, DictConfig):  # a section: its keys are set one by one
        keys = list(current.keys())
        raise OverrideError(item, key, f"{key} is a section of settings (keys: "
                                       f"{', '.join(map(str, keys))}), {got}",
                            f"set one of its keys, e.g. {key}.{keys[0]}=..." if keys
                            else f"give {key} a mapping")
    kind = _kind(current)
    if isinstance(current, ListConfig) and isinstance(value, list):  # items of another type
        kind, got = f"a list of {_PLURAL[type(current[0])]}", f"got {value!r}"
    shown = OmegaConf.to_container(current, resolve=False) \
        if isinstance(current, ListConfig) else current
    kind += "".join(f" or {w}" for w in (words or {}).get(key.strip(), ()))
    raise OverrideError(item, key, f"{key} takes {kind} (its default here is {shown!r}), {got}",
                        f"give {key} {kind}, e.g. {key}={override_value(shown)}")


def override_value(value) -> str:
    """``value`` as it is written on the command line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ", ".join(map(override_value, value)) + "]"
    return str(value)


def apply_overrides(cfg: DictConfig, overrides: Sequence[str],
                    words: Mapping[str, Sequence[str]] | None = None) -> DictConfig:
    """Apply ``a.b=value`` overrides (values parsed as YAML). Each is checked before it is
    applied: a key that does not exist in the config is an :class:`UnknownKeyError` naming it
    (so a misspelt setting never passes silently), a value of another type than the key's
    default an :class:`OverrideError` (see :func:`check_override`, and its ``words``)."""
    OmegaConf.set_struct(cfg, True)
    for item in overrides:
        check_override(cfg, item, words)
        try:
            cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist([item]))
        except ConfigKeyError as e:
            key = item.split("=", 1)[0]
            raise UnknownKeyError(f"unknown config key {key!r} in override {item!r}: "
                                  f"{e.msg.splitlines()[0]} (fix: check the spelling against "
                                  f"conf/ and its groups)") from e
    return cfg
