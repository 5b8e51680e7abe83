"""``key=value`` settings over a composed config: each checked against the setting it
replaces (an unknown key, or a value of another type than the key's default, is an error
naming it and the fix) before it is merged."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, GrammarParseError

from ..errors import OverrideError, UnknownKeyError

__all__ = ["apply_overrides", "check_override", "override_value", "plain"]


def plain(cfg: Any) -> dict[str, Any]:
    """A plain dict from a dict, an OmegaConf DictConfig (interpolations resolved) or None.

    Args:
        cfg: the settings (None: an empty dict).
    """
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
    type (a pipeline's ``reranker.top_k: tune``).

    Args:
        cfg: the config the setting goes into.
        item: the ``key=value`` setting.
        words: keys -> the words they take besides their default's type.
    """
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
    """``value`` as it is written on the command line.

    Args:
        value: a setting's value (None, a bool, a list, a number or a string).
    """
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
    default an :class:`OverrideError` (see :func:`check_override`, and its ``words``).

    Args:
        cfg: the composed config (made struct).
        overrides: the ``key=value`` settings, applied in order.
        words: as :func:`check_override`'s.
    """
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
