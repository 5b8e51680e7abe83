"""Files the suite writes and reads back later (caches, run files, records, resume state).

Written atomically: :func:`atomic_path` / :func:`atomic_dir` give a temporary file or folder
beside the target, renamed over it only when the writing block ends without an error, so a
crash never leaves half a file under the real name.

Read back through :func:`read_back` (or :func:`read_json`), which turns every sign of damage
(an empty, truncated or garbage file, another format, a missing key) into :class:`Damaged`
naming the file and what is wrong. A cache catches it and rebuilds (:func:`rebuilding` logs
the warning); what cannot be rebuilt (a run file, a record, resume state) is refused with
:func:`refuse`, an :class:`~retrieval_qa.errors.InputFileError` (``rqa`` exit status 2).
Light on purpose (the standard library only): scripts and the command line import it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import shutil
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from .errors import InputFileError

log = logging.getLogger(__name__)
T = TypeVar("T")

#: what a reader raises on bytes it cannot read as the format it expects (pyarrow's
#: ArrowInvalid and json's JSONDecodeError are ValueErrors; torch's zip reader raises a
#: RuntimeError, its unpickler pickle's errors)
DAMAGE = (OSError, EOFError, ValueError, KeyError, TypeError, IndexError, RuntimeError,
          pickle.UnpicklingError, zipfile.BadZipFile)


class Damaged(ValueError):
    """A file the suite wrote that cannot be read back as written: ``path`` and ``problem``
    (e.g. "empty file", "not an Arrow table (Not an Arrow file)", "format 0; this version
    reads 1"). Its readers rebuild or refuse (:func:`refuse`); a ValueError, so one that
    reached ``rqa`` unhandled would still be one line naming the file, exit status 2."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path, self.problem = str(path), problem
        super().__init__(f"{self.path}: {problem}")


def error_line(e: BaseException) -> str:
    """The first line of an exception's message, at most 200 characters (a reader's message,
    torch's in particular, runs on for lines), or its type's name when it has none."""
    text = str(e).strip().splitlines()
    return text[0][:200] if text else type(e).__name__


def read_back(path: str | Path, read: Callable[[Path], T], expected: str) -> T:
    """``read(path)``, or :class:`Damaged` naming ``path`` when it is missing, empty or not
    ``expected`` (e.g. "an Arrow table")."""
    path = Path(path)
    try:
        if path.is_file() and path.stat().st_size == 0:
            raise Damaged(path, "empty file")
        return read(path)
    except Damaged:
        raise
    except FileNotFoundError as e:
        raise Damaged(path, "missing" if not path.exists()
                      else f"not {expected} ({error_line(e)})") from None
    except DAMAGE as e:
        raise Damaged(path, f"not {expected} ({error_line(e)})") from None


def read_json(path: str | Path, required: tuple[str, ...] = (),
              version: tuple[str, Any] | None = None) -> dict:
    """A JSON object with the ``required`` keys (and ``version``: ``(key, value)`` the format
    version it must record), or :class:`Damaged` (a key missing reads as a file of an older
    format)."""
    obj = read_back(path, lambda p: json.loads(p.read_text(encoding="utf-8")), "JSON")
    if not isinstance(obj, dict):
        raise Damaged(path, f"not a JSON object (a {type(obj).__name__})")
    if version is not None:
        check_version(obj.get(version[0]), version[1], path)
    missing = [k for k in required if k not in obj]
    if missing:
        raise Damaged(path, f"no {', '.join(map(repr, missing))} (an older format, or "
                            "damaged)")
    return obj


def check(ok: bool, path: str | Path, problem: str) -> None:
    """:class:`Damaged` (``path``, ``problem``) unless ``ok``."""
    if not ok:
        raise Damaged(path, problem)


def check_version(found: Any, expected: Any, path: str | Path) -> None:
    """A file of another format version (an older one, written before a change of layout)."""
    if found is None:
        raise Damaged(path, f"no format version (an older format); this version reads "
                            f"{expected!r}")
    check(found == expected, path, f"format {found!r}; this version reads {expected!r}")


def rebuilding(damage: Damaged, logger: logging.Logger | None = None) -> None:
    """The warning of a cache found damaged, before it is rebuilt."""
    (logger or log).warning("damaged cache %s (%s): rebuilding", damage.path, damage.problem)


def refuse(damage: Damaged, what: str, fix: str) -> InputFileError:
    """The error for a damaged file that cannot be rebuilt: ``what`` it is (e.g. "run
    file"), the file, the damage and the fix."""
    return InputFileError(what, damage.path, f"damaged: {damage.problem}", fix)


def read_json_or_refuse(path: str | Path, what: str, fix: str,
                        required: tuple[str, ...] = ()) -> dict:
    """:func:`read_json` of a file that cannot be rebuilt: refused (:func:`refuse`) when
    damaged."""
    try:
        return read_json(path, required)
    except Damaged as damage:
        raise refuse(damage, what, fix) from None


def read_report(path: str | Path) -> dict:
    """A run's ``result.json`` (the report of ``rqa train``), refused when damaged."""
    return read_json_or_refuse(path, "run report", "delete it and run the same `rqa train` "
                               "command again: the run resumes from its last checkpoint and "
                               "writes its report again")


# ------------------------------------------------------------------------------ writing


def _beside(path: Path) -> Path:
    """A fresh name beside ``path`` (hidden, unique per process and call)."""
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial")


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` for the block to write (not created); renamed over
    ``path`` when the block ends, removed when it raises."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _beside(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_dir(folder: str | Path) -> Iterator[Path]:
    """A fresh empty folder beside ``folder`` for the block to fill; it replaces ``folder``
    (and whatever was there) when the block ends, and is removed when it raises."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = _beside(folder)
    tmp.mkdir()
    try:
        yield tmp
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder)
        else:
            folder.unlink(missing_ok=True)
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_text(path: str | Path, text: str) -> Path:
    """``text`` (UTF-8) to ``path``, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)
