"""Paths in what a command prints or a study writes, named so that no machine's layout shows.

Every JSON a command prints (``rqa ...``), every ``result.json`` of ``rqa train`` and every
analysis file goes through :func:`portable`: an absolute path anywhere in a string (a whole
value, a pool's ``source`` sentence, a ``command``, a key such as ``pool:/x/f.json``) is
rewritten, the first rule that applies winning:

1. under ``$RQA_DATA_DIR`` or ``$RQA_CACHE_DIR``: ``$RQA_DATA_DIR/squad/dev-v1.1.json.gz``;
2. inside an installed package (``.../site-packages/NAME/...``): ``package:NAME/...``;
3. under the working directory: relative to it (``runs/...``: what a command run from the
   same folder reads back, so a printed checkpoint still loads);
4. under the repository's parent folder: relative to the repository (``runs/...``,
   ``../shared/data/...``, the project's layout); when that parent is the system's
   temporary folder (a checkout cloned straight into ``/tmp``), only paths inside the
   repository, since the folder's other files belong to other programs;
5. under the home folder: ``~/...``.

Any other path (a temporary folder outside these, say) is left as it is: it is what the user
asked for, and the committed results are kept free of them by
``tests/test_committed_paths.py``."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

__all__ = ["portable", "portable_path"]

# an absolute path inside a string: a "/" that does not follow a word character, a dot, "~",
# "$" or another "/" and is not followed by one ("a/b", "../x", "~/x", "$VAR/x" and a URL's
# "//" stay), up to a space, comma, quote or bracket
_ABSOLUTE = re.compile(r"(?<![\w.~$/])/(?!/)[^\s,;'\"()\[\]{}<>|`]+")
_PACKAGES = ("site-packages", "dist-packages")


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _env_dir(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value).expanduser().resolve() if value else None


def portable_path(text: str, root: Path | None = None) -> str:
    """One absolute path, named by the rules of the module docstring.

    Args:
        text: the path; a relative one is returned as it is.
        root: the repository; None: this checkout.
    """
    path = Path(text)
    if not path.is_absolute():
        return text
    for var in ("RQA_DATA_DIR", "RQA_CACHE_DIR"):
        folder = _env_dir(var)
        if folder is not None and folder != Path(folder.anchor) and _under(path, folder):
            rest = path.relative_to(folder).as_posix()
            return f"${var}/{rest}" if rest != "." else f"${var}"
    parts = path.parts
    for marker in _PACKAGES:
        if marker in parts[:-1]:
            return "package:" + "/".join(parts[len(parts) - parts[::-1].index(marker):])
    root = (root or _repo_root()).resolve()
    cwd = Path.cwd().resolve()
    home = Path.home().resolve()
    if cwd not in (Path(cwd.anchor), home) and _under(path, cwd):
        return os.path.relpath(path, cwd)
    beside = root if root.parent == Path(tempfile.gettempdir()).resolve() else root.parent
    if beside != Path(beside.anchor) and _under(path, beside):
        return os.path.relpath(path, root)
    if home != Path(home.anchor) and _under(path, home):
        return "~/" + path.relative_to(home).as_posix()
    return text


def _portable_text(text: str, root: Path | None) -> str:
    return _ABSOLUTE.sub(lambda m: portable_path(m.group(0), root), text)


def portable(obj, root: Path | None = None):
    """``obj`` (dicts, lists, tuples, strings; anything else as is) with every absolute path in
    its strings and keys rewritten by :func:`portable_path`; a new object, ``obj`` untouched.

    Args:
        obj: the object (a command's JSON).
        root: the repository; None: this checkout.
    """
    if isinstance(obj, dict):
        return {portable(k, root): portable(v, root) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(portable(v, root) for v in obj)
    if isinstance(obj, str) and "/" in obj:
        return _portable_text(obj, root)
    return obj
