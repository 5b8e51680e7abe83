"""The allowed values of the numeric settings, declared in ``conf/ranges.yaml`` (and in the
``ranges.yaml`` of each ``$RQA_CONF_PATH`` folder, whose rules win) and checked when a config
is composed, before anything is written: a key (exact, or a glob such as ``*.dropout``) maps
to a rule such as ``int >= 1``, ``[0, 1)`` or ``-1 or int >= 1`` (the file's header gives the
grammar). An exact key wins over the globs; the globs are tried in the file's order."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf

from ..errors import InputFileError
from .files import conf_dir, conf_dirs, load_yaml_file

__all__ = ["FILE", "Rule", "leaves", "load_rules", "out_of_range", "rule_for"]

FILE = "ranges.yaml"
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_COMPARE = re.compile(rf"(int\s+)?(>=|<=|>|<)\s*({_NUMBER})")
_INTERVAL = re.compile(rf"(int\s+)?([\[(])\s*({_NUMBER})\s*,\s*({_NUMBER})\s*([\])])")
_WORD = re.compile(rf"null|{_NUMBER}|[A-Za-z][\w-]*")
_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": lambda v, b: v >= b, ">": lambda v, b: v > b,
    "<=": lambda v, b: v <= b, "<": lambda v, b: v < b}


def _is_number(value, whole: bool) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) if whole else math.isfinite(value)


def _alternative(text: str) -> tuple[Callable[[Any], bool], str]:
    """One alternative of a rule: its test and its words for a message; a ValueError when
    it is none of the forms of the grammar."""
    if text == "any":
        return (lambda v: True), "any value"
    if text == "string":
        return (lambda v: isinstance(v, str)), "a string"
    if text == "list":
        return (lambda v: isinstance(v, list)), "a list"
    if m := _COMPARE.fullmatch(text):
        whole, op, bound = bool(m[1]), m[2], float(m[3])
        return ((lambda v: _is_number(v, whole) and _OPS[op](v, bound)),
                f"{'an integer' if whole else 'a number'} {op} {m[3]}")
    if m := _INTERVAL.fullmatch(text):
        whole, low, high = bool(m[1]), float(m[3]), float(m[4])
        above = _OPS[">=" if m[2] == "[" else ">"]
        below = _OPS["<=" if m[5] == "]" else "<"]
        return ((lambda v: _is_number(v, whole) and above(v, low) and below(v, high)),
                f"{'an integer' if whole else 'a number'} in {m[2]}{m[3]}, {m[4]}{m[5]}")
    if _WORD.fullmatch(text):
        literal = yaml.safe_load(text)
        return ((lambda v: type(v) is type(literal) and v == literal),
                "null" if literal is None else text)
    raise ValueError(f"{text!r} is none of the forms")


@dataclass(frozen=True)
class Rule:
    """A rule of ``ranges.yaml``: alternatives joined by ``or``; a value passes when one of
    them allows it. A list passes when the rule allows ``list``, else when each item does.

    Args:
        text: the rule as written.
        where: the file that declares it.
        allowed: the alternatives in words, for a message.
        tests: each alternative's test of a value.
    """

    text: str  # as written
    where: str  # the file that declares it
    allowed: str  # the alternatives in words, for a message
    tests: tuple[Callable[[Any], bool], ...]

    @classmethod
    def parse(cls, text: str, where: str) -> Rule:
        """The rule ``text``; a ValueError names the part that is none of the grammar's forms.

        Args:
            text: the rule (``int >= 1``, ``[0, 1) or null``).
            where: the file that declares it.
        """
        parts = [_alternative(part.strip()) for part in text.split(" or ")]
        return cls(text, where, " or ".join(said for _, said in parts),
                   tuple(test for test, _ in parts))

    def allows(self, value) -> bool:
        """Whether the rule allows ``value``.

        Args:
            value: a setting's value (a list: each item, unless the rule allows ``list``).
        """
        if isinstance(value, list) and not any(test(value) for test in self.tests):
            return all(self.allows(v) for v in value)
        return any(test(value) for test in self.tests)


def load_rules() -> dict[str, Rule]:
    """The rules of every ``ranges.yaml`` of :func:`~.config.conf_dirs`, the packaged file's
    first, each later-read folder's over them (its keys first in the glob order)."""
    rules: dict[str, Rule] = {}
    for folder in reversed(conf_dirs()):
        path = folder / FILE
        if not path.is_file():
            continue
        declared = OmegaConf.to_container(load_yaml_file(path), resolve=False)
        where = f"conf/{FILE}" if folder == conf_dir() else str(path)
        own = {}
        for key, text in declared.items():
            try:
                own[str(key)] = Rule.parse(str(text), where)
            except ValueError as e:
                raise InputFileError("config file", path, f"the rule of {key!r}, {text!r}: {e}",
                                     "write alternatives joined by ' or ', each a comparison "
                                     "(>= 1, > 0), an interval ([0, 1), (0, 1]), either after "
                                     "'int' for whole numbers, a value (null, -1, auto), "
                                     "string, list or any; see the file's header") from None
        rules = {**own, **{k: r for k, r in rules.items() if k not in own}}
    return rules


def rule_for(key: str, rules: dict[str, Rule]) -> Rule | None:
    """The rule of a dotted key: its own, else the first glob that matches it.

    Args:
        key: the dotted key (``model.towers.encoder.dropout``).
        rules: the rules (:func:`load_rules`).
    """
    if key in rules:
        return rules[key]
    return next((rule for pattern, rule in rules.items()
                 if any(c in pattern for c in "*?[") and fnmatchcase(key, pattern)), None)


def leaves(node: DictConfig | ListConfig, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of each value set in a config, interpolations left out (the value
    they point to is checked where it is set); a list of mappings is walked with its indices
    as keys (``data.extra_pairs.0.weight``), a list of values is one value (a plain list).

    Args:
        node: the config (or a node of it).
        prefix: the dotted key of ``node``, with its trailing dot.
    """
    keys = node.keys() if isinstance(node, DictConfig) else range(len(node))
    for key in keys:
        if OmegaConf.is_interpolation(node, key) or OmegaConf.is_missing(node, key):
            continue
        value, path = node[key], f"{prefix}{key}"
        if isinstance(value, ListConfig):
            items = [value[i] for i in range(len(value))
                     if not OmegaConf.is_interpolation(value, i)]
            if any(isinstance(v, (DictConfig, ListConfig)) for v in items):
                yield from leaves(value, path + ".")
            else:
                yield path, items
        elif isinstance(value, DictConfig):
            yield from leaves(value, path + ".")
        else:
            yield path, value


def out_of_range(cfg: DictConfig, rules: dict[str, Rule] | None = None
                 ) -> tuple[str, Any, Rule] | None:
    """The first (key, value, rule) of ``cfg`` whose value its rule does not allow; keys
    without a rule are not restricted.

    Args:
        cfg: the composed config.
        rules: the rules; None: :func:`load_rules`.
    """
    rules = load_rules() if rules is None else rules
    for key, value in leaves(cfg):
        rule = rule_for(key, rules)
        if rule is not None and not rule.allows(value):
            return key, value, rule
    return None
