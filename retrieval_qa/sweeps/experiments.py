"""What conf/experiment/ says about the experiments a planner runs: which share another's
composed profiles (a CPU recipe's variant: :func:`same_profiles`), and which a queue line can
run on its own (:func:`standalone`: its data needs nothing another step makes)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

from ..config import conf_files, conf_names, find_conf, load_yaml_file

#: the profiles two experiments must compose alike to be one experiment on a GPU
SAME_PROFILES = ("paper", "gpu")
#: data keys whose input another step makes (a teacher's scores, an exported retriever, mined
#: pairs): an experiment whose data has one runs after its chain, never alone
CHAIN_INPUTS = ("teacher", "dense_retriever")


def _composed(name: str, profile: str) -> dict:
    from omegaconf import OmegaConf

    from ..training.compose import compose

    cfg = OmegaConf.to_container(compose([f"experiment={name}", f"profile={profile}"]))
    return {k: v for k, v in cfg.items() if k != "experiment"}


def _extends(name: str) -> str | None:
    """The experiment ``name`` extends (its file's ``extends:``), or None."""
    path = find_conf("experiment", name)
    if path is None:
        return None
    raw = load_yaml_file(path)
    return raw.get("extends")


def _ancestors(name: str) -> list[str]:
    out, node = [], _extends(name)
    while node and node not in out:
        out.append(node)
        node = _extends(node)
    return out


def _conf_key() -> str:
    """A digest of every config file and the code that composes them."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    files = conf_files()
    files += [(f"code/{p.relative_to(package).as_posix()}", p)
              for p in [*sorted((package / "config").glob("*.py")), package / "registry.py"]]
    for name, path in files:
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _compute_same_profiles() -> dict[str, str]:
    names = conf_names("experiment")
    composed = {n: json.dumps([_composed(n, p) for p in SAME_PROFILES], sort_keys=True,
                              default=str) for n in names}
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(composed[n], []).append(n)
    out = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        # the base: the member the others extend, else the first by name
        base = next((m for m in members
                     if all(m in _ancestors(o) for o in members if o != m)), members[0])
        out.update({m: base for m in members if m != base})
    return dict(sorted(out.items()))


@functools.cache
def same_profiles() -> dict[str, str]:
    """Each experiment whose composed ``paper`` and ``gpu`` profiles equal another's (less
    the experiment's name), mapped to that other one (the one it ``extends``): a CPU
    recipe's variant, run on a GPU under its base's name. Kept on disk by the digest of conf/
    and the composing code (composing every experiment takes seconds)."""
    from ..data.cache import cache_root

    cache = cache_root() / "experiments" / f"same_profiles-{_conf_key()}.json"
    try:
        return json.loads(cache.read_text())
    except (OSError, ValueError):
        pass
    out = _compute_same_profiles()
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(out))
        os.replace(tmp, cache)
    except OSError:
        pass
    return out


@functools.cache
def standalone(name: str, profile: str = "gpu") -> bool:
    """Whether ``rqa train experiment=NAME profile=PROFILE`` can run without a step before it
    making its input: its data has none of :data:`CHAIN_INPUTS` and needs no mined pairs.

    Args:
        name: the experiment (a file of conf/experiment/, without ``.yaml``).
        profile: the profile it is composed with.
    """
    from ..training.compose import compose

    data = compose([f"experiment={name}", f"profile={profile}"]).data
    return not any(k in data for k in CHAIN_INPUTS) and data.get("mined") != "required"


def with_profile(profile: str = "gpu") -> list[str]:
    """The experiments offering ``profile``, less those whose profiles are another's
    (:func:`same_profiles`).

    Args:
        profile: the profile's name (``paper``, or a ``profiles:`` block's, e.g. ``gpu``).
    """
    from ..training.compose import experiment_profiles

    variants = same_profiles()
    return [n for n, profiles in experiment_profiles().items()
            if profile in profiles and n not in variants]
