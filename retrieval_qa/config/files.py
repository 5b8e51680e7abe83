"""Finding and reading the YAML files of ``conf/`` (and of the ``$RQA_CONF_PATH`` folders):
the one reader of config files, the ``extends:`` chains of a group's files, and the read
scope of a composition (:func:`reading`: inside it each file is parsed once, later reads get
a copy)."""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf

from ..errors import InputFileError, UsageError, did_you_mean

__all__ = ["chain", "conf_dir", "conf_dirs", "conf_names", "load_chain", "load_yaml",
           "load_yaml_file", "merge_chain", "merge_extends", "reading", "shown_path", "yaml_error_line"]

#: the repository (the folder that holds conf/ and retrieval_qa/)
_ROOT = Path(__file__).resolve().parents[2]
#: the files parsed in the current read scope (:func:`reading`), by resolved path; None:
#: outside one (each read parses the file)
_READ: ContextVar[dict[str, DictConfig] | None] = ContextVar("rqa_config_read", default=None)


def conf_dir() -> Path:
    """The packaged ``conf/`` folder, or ``$RQA_CONF_DIR`` when set."""
    return Path(os.environ.get("RQA_CONF_DIR") or _ROOT / "conf")


def shown_path(path: str | Path) -> str:
    """A config path as a message names it: relative to the repository when inside it
    (``conf/model/bm25.yaml``, the same on every machine), else as it is (a folder of
    ``$RQA_CONF_PATH`` elsewhere is the user's own).

    Args:
        path: the file or folder.
    """
    try:
        return Path(path).resolve().relative_to(_ROOT).as_posix()
    except ValueError:
        return str(path)


def conf_dirs() -> list[Path]:
    """Where configs are looked up, first match wins: the folders of ``$RQA_CONF_PATH``
    (``os.pathsep``-separated; a project's own methods and experiments), then :func:`conf_dir`."""
    extra = [Path(d) for d in os.environ.get("RQA_CONF_PATH", "").split(os.pathsep) if d]
    return [*extra, conf_dir()]


def find_conf(group: str, name: str) -> Path | None:
    """The file ``<group>/<name>.yaml`` (or ``<group>/<name>`` when it names a file) of the
    first conf folder holding it (:func:`conf_dirs`), or None.

    Args:
        group: the folder of conf/ (``sweeps``, ``experiment``, ...).
        name: the file's name, with or without ``.yaml``.
    """
    for d in conf_dirs():
        for candidate in (d / group / f"{name}.yaml", d / group / str(name)):
            if candidate.is_file():
                return candidate
    return None


def conf_files() -> list[tuple[str, Path]]:
    """Every YAML file of every conf folder, as (its path relative to its folder, its path),
    in the search order (for a digest of the whole configuration)."""
    return [(p.relative_to(d).as_posix(), p) for d in conf_dirs()
            for p in sorted(d.rglob("*.yaml"))]


def conf_names(group: str) -> list[str]:
    """The config names of a group (``experiment``, ``model``, ...) across :func:`conf_dirs`.

    Args:
        group: the folder of conf/ (``experiment``, ``model``, ``tables``, ...).
    """
    return sorted({p.stem for d in conf_dirs() for p in (d / group).glob("*.yaml")})


@contextlib.contextmanager
def reading() -> Iterator[None]:
    """The read scope of one composition: inside it, each config file is parsed once and
    every later read of it gets a copy of that parse (so a composition that needs a file in
    two places, e.g. a shared profile that several profile blocks extend, reads it once).
    A scope opened inside another is the outer one's; outside any, each read parses."""
    if _READ.get() is not None:
        yield
        return
    token = _READ.set({})
    try:
        yield
    finally:
        _READ.reset(token)


def _parse(path: str | Path) -> DictConfig:
    """The one YAML reader of config files (a test counts the reads by patching it)."""
    return OmegaConf.load(path)


def yaml_error_line(error: yaml.YAMLError) -> str:
    """Where and what a YAML error is, in one line ("line 3, column 5: ...").

    Args:
        error: the error PyYAML raised.
    """
    mark = getattr(error, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    what = getattr(error, "problem", None) or str(error).splitlines()[0]
    context, start = getattr(error, "context", None), getattr(error, "context_mark", None)
    if context and start is not None:  # where the unfinished construct began
        what += f" ({context} from line {start.line + 1}, column {start.column + 1})"
    return where + what


def load_yaml_file(path: str | Path, what: str = "config file") -> DictConfig:
    """A YAML mapping as a DictConfig; a syntax error, or a file that is not a mapping, is an
    :class:`InputFileError` naming the file and the line. Inside :func:`reading`, a file read
    before is not parsed again (a copy of its first parse).

    Args:
        path: the file.
        what: what the file is, for the error (``pipeline config``).
    """
    cache = _READ.get()
    key = str(Path(path).resolve()) if cache is not None else ""
    if cache is not None and key in cache:
        return copy.deepcopy(cache[key])
    try:
        cfg = _parse(path)
    except yaml.YAMLError as e:
        raise InputFileError(what, shown_path(path), f"not valid YAML ({yaml_error_line(e)})",
                             "repair the YAML at that line") from e
    if not isinstance(cfg, DictConfig):
        raise InputFileError(what, shown_path(path), "not a YAML mapping (key: value lines)",
                             "write its settings as key: value")
    if cache is not None:
        cache[key] = copy.deepcopy(cfg)
    return cfg


def load_yaml(relative: str) -> DictConfig:
    """The config file ``relative`` (``model/bm25.yaml``) of the first of :func:`conf_dirs`
    that has it; a FileNotFoundError names the folders and the group's files.

    Args:
        relative: its path under conf/.
    """
    path = next((d / relative for d in conf_dirs() if (d / relative).is_file()), None)
    if path is None:
        group = Path(relative).parent.as_posix()
        names = conf_names(group)
        raise FileNotFoundError(f"config {relative} not found in "
                                f"{[shown_path(d) for d in conf_dirs()]}; "
                                f"{did_you_mean(Path(relative).stem, names)}available in "
                                f"{group}/: {names}")
    return load_yaml_file(path)


def chain(group: str, name: str) -> list[tuple[str, DictConfig]]:
    """conf/<group>/<name>.yaml and the files it ``extends:`` (each its parent of the same
    group), the root parent first, each as (its name, its settings without ``extends``); a
    file that extends itself through its parents is a :class:`UsageError`.

    Args:
        group: the folder of conf/.
        name: the file's name in it.
    """
    out: list[tuple[str, DictConfig]] = []
    while name:
        if name in [n for n, _ in out]:
            raise UsageError(f"conf/{group}/{out[0][0]}.yaml: its extends: chain "
                             f"{' -> '.join([n for n, _ in out] + [name])} is a cycle (fix: "
                             "extend a file that does not extend it)")
        node = load_yaml(f"{group}/{name}.yaml")
        out.append((name, node))
        name = node.pop("extends", None)
    return out[::-1]


def merge_chain(files: list[tuple[str, DictConfig]]) -> DictConfig:
    """The files of a :func:`chain` merged, each over its parent.

    Args:
        files: (name, settings) of each file, the root parent first.
    """
    merged = files[0][1]
    for _, node in files[1:]:
        merged = OmegaConf.merge(merged, node)
    return merged


def load_chain(group: str, name: str) -> DictConfig:
    """conf/<group>/<name>.yaml; a file with ``extends: OTHER`` is merged over OTHER's (of the
    same group). (:func:`retrieval_qa.config.load_group` is this for every group but
    ``experiment``, whose profile blocks it composes too.)

    Args:
        group: the folder of conf/.
        name: the file's name in it.
    """
    return merge_chain(chain(group, name))


def merge_extends(group: str, cfg: DictConfig) -> DictConfig:
    """``cfg`` merged over ``conf/<group>/<OTHER>.yaml`` when it says ``extends: OTHER``.

    Args:
        group: the folder of conf/ that OTHER is in.
        cfg: the settings (their ``extends`` is removed).
    """
    parent = cfg.pop("extends", None)
    return OmegaConf.merge(load_chain(group, parent), cfg) if parent else cfg
