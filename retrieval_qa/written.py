"""Files the suite writes and reads back later (caches, run files, records, resume state).

Written atomically: :func:`atomic_path` / :func:`atomic_dir` give a temporary file or folder
beside the target, renamed over it only when the writing block ends without an error, so a
crash never leaves half a file under the real name, and removed on any error (a full disk,
Ctrl-C). Writes never destroy: a symbolic link is written through to its target, and a device,
FIFO, socket or folder where a file goes is refused (:func:`write_target`); a full disk or an
unwritable folder is an OSError naming the file written (``rqa``: one line, exit status 2).

Read back through :func:`read_back` (or :func:`read_json`), which turns every sign of damage
(an empty, truncated or garbage file, another format, a missing key) into :class:`Damaged`
naming the file and what is wrong. A cache catches it and rebuilds (:func:`rebuilding` logs
the warning); what cannot be rebuilt (a run file, a record, resume state) is refused with
:func:`refuse`, an :class:`~retrieval_qa.errors.InputFileError` (``rqa`` exit status 2).
Light on purpose (the standard library only): scripts and the command line import it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import pickle
import shutil
import stat
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
    """A file the suite wrote that cannot be read back as written. Its readers rebuild or
    refuse (:func:`refuse`); a ValueError, so one that reached ``rqa`` unhandled would still
    be one line naming the file, exit status 2.

    Args:
        path: the file.
        problem: what is wrong (e.g. "empty file", "not an Arrow table (Not an Arrow file)",
            "format 0; this version reads 1").
    """

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path, self.problem = str(path), problem
        super().__init__(f"{self.path}: {problem}")


def error_line(e: BaseException) -> str:
    """The first line of an exception's message, at most 200 characters (a reader's message,
    torch's in particular, runs on for lines), or its type's name when it has none.

    Args:
        e: the exception.
    """
    text = str(e).strip().splitlines()
    return text[0][:200] if text else type(e).__name__


def read_back(path: str | Path, read: Callable[[Path], T], expected: str) -> T:
    """``read(path)``, or :class:`Damaged` naming ``path`` when it is missing, empty or not
    ``expected``.

    Args:
        path: the file.
        read: reads the file, given its path.
        expected: what it should be, for the message (e.g. "an Arrow table").
    """
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
    """A JSON object with the ``required`` keys (and ``version``), or :class:`Damaged` (a key
    missing reads as a file of an older format).

    Args:
        path: the file.
        required: the keys it must have.
        version: ``(key, value)``: the format version it must record; None: not checked.
    """
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
    """:class:`Damaged` (``path``, ``problem``) unless ``ok``.

    Args:
        ok: the condition.
        path: the file.
        problem: what is wrong when not ``ok``.
    """
    if not ok:
        raise Damaged(path, problem)


def check_version(found: Any, expected: Any, path: str | Path) -> None:
    """:class:`Damaged` for a file of another format version (an older one, written before
    a change of layout).

    Args:
        found: the version the file records; None: none (an older format).
        expected: the version this code reads.
        path: the file.
    """
    if found is None:
        raise Damaged(path, f"no format version (an older format); this version reads "
                            f"{expected!r}")
    check(found == expected, path, f"format {found!r}; this version reads {expected!r}")


def rebuilding(damage: Damaged, logger: logging.Logger | None = None) -> None:
    """The warning of a cache found damaged, before it is rebuilt.

    Args:
        damage: the damage found.
        logger: where to log; None: this module's logger.
    """
    (logger or log).warning("damaged cache %s (%s): rebuilding", damage.path, damage.problem)


def refuse(damage: Damaged, what: str, fix: str) -> InputFileError:
    """The error for a damaged file that cannot be rebuilt: what it is, the file, the
    damage and the fix.

    Args:
        damage: the damage found.
        what: what the file is (e.g. "run file").
        fix: how to fix it.
    """
    return InputFileError(what, damage.path, f"damaged: {damage.problem}", fix)


def read_json_or_refuse(path: str | Path, what: str, fix: str,
                        required: tuple[str, ...] = ()) -> dict:
    """:func:`read_json` of a file that cannot be rebuilt: refused (:func:`refuse`) when
    damaged.

    Args:
        path: the file.
        what: what the file is (e.g. "run file").
        fix: how to fix it.
        required: the keys it must have.
    """
    try:
        return read_json(path, required)
    except Damaged as damage:
        raise refuse(damage, what, fix) from None


def read_report(path: str | Path) -> dict:
    """A run's ``result.json`` (the report of ``rqa train``), refused when damaged.

    Args:
        path: the ``result.json``.
    """
    return read_json_or_refuse(path, "run report", "delete it and run the same `rqa train` "
                               "command again: the run resumes from its last checkpoint and "
                               "writes its report again")


# ------------------------------------------------------------------------------ writing


def _kind(mode: int) -> str:
    """What a file of ``mode`` is, in words."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a file")):
        if test(mode):
            return name
    return "not a regular file"


def write_target(path: str | Path, what: str = "output", folder: bool = False) -> Path:
    """Where a write to ``path`` goes: ``path`` itself, or the file a symbolic link at ``path``
    names (followed to its end, so the link stays a link, as a shell's ``>`` does). A target
    that exists and is neither a regular file (``folder``: a folder) nor missing (a device such
    as /dev/null, a FIFO, a socket, a folder where a file goes, a file where a folder goes) is
    refused: the write would replace it.

    Args:
        path: the file (or folder) to write.
        what: where the path was given, for the error (an option such as ``--run-file``).
        folder: the write makes a folder (:func:`atomic_dir`), not a file.

    Returns:
        The path to write (absolute when a link was followed).

    Raises:
        InputFileError: the target is something else than the write makes (``rqa`` exit
            status 2), naming it, what it is and the fix.

    Example:

        >>> write_target("runs/bm25.jsonl", "--run-file")  # doctest: +SKIP
        PosixPath('runs/bm25.jsonl')
    """
    given = Path(path)
    target = Path(os.path.realpath(given)) if given.is_symlink() else given
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return target  # a new file (or a link's missing target): created
    except NotADirectoryError:
        return target  # a file where a folder of the path should be: the writer names it
    if stat.S_ISDIR(mode) if folder else stat.S_ISREG(mode):
        return target
    via = f" (the target of the link {given})" if target != given else ""
    expected = "a folder" if folder else "a file"
    raise InputFileError(what, target, f"is {_kind(stat.S_IFMT(mode))}{via}, not {expected}; "
                         f"writing would replace it", f"give the path of {expected} to "
                         "replace, or of a new one")


def make_folder(folder: str | Path) -> Path:
    """``folder`` and its parents, created where missing; a file in the way is a
    NotADirectoryError naming it (mkdir's "File exists" would not say it is a file).

    Args:
        folder: the folder.
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError as e:  # a file (or a link to one) where the folder goes
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR),
                                 e.filename or str(folder)) from None
    return folder


@contextlib.contextmanager
def _naming(target: Path, tmp: Path) -> Iterator[None]:
    """An OSError of the block that names no file, or the temporary one, names ``target``
    instead (a full disk's ENOSPC from ``write()`` names none); an error of a writer that is
    no OSError (torch's zip writer raises a RuntimeError) on a disk with no space left is
    ENOSPC naming ``target``."""
    try:
        yield
    except OSError as e:
        if e.errno is not None:
            for attr in ("filename", "filename2"):
                name = getattr(e, attr)
                if attr == "filename" and name is None:
                    e.filename = str(target)
                elif name is not None and str(name).startswith(str(tmp)):
                    setattr(e, attr, str(target) + str(name)[len(str(tmp)):])
            if e.filename2 == e.filename:
                e.filename2 = None
        raise
    except Exception as e:
        try:
            full = shutil.disk_usage(target.parent).free == 0
        except OSError:
            full = False
        if full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target)) from e
        raise


def _beside(path: Path, suffix: str = "partial") -> Path:
    """A fresh name beside ``path`` (hidden, unique per process and call)."""
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.{suffix}")


@contextlib.contextmanager
def atomic_path(path: str | Path, what: str = "output", partial: str | None = None
                ) -> Iterator[Path]:
    """A temporary path beside ``path`` for the block to write (not created); renamed over
    ``path`` when the block ends, removed when it raises (anything, KeyboardInterrupt too).

    A symbolic link is written through (its target is replaced, the link stays); a device, a
    FIFO, a socket or a folder at ``path`` is refused (:func:`write_target`). An OSError of
    the block (a full disk) names ``path``, not the temporary file.

    Args:
        path: the file to write.
        what: where the path was given, for the errors (e.g. ``--run-file``).
        partial: a suffix: the temporary file is the target's name and it (default: a
            hidden name unique to the call).

    Example:

        >>> with atomic_path("runs/q.pt", "--output") as tmp:  # doctest: +SKIP
        ...     torch.save(tensor, tmp)
    """
    target = write_target(path, what)
    make_folder(target.parent)
    tmp = target.with_name(target.name + partial) if partial else _beside(target)
    try:
        with _naming(target, tmp):
            yield tmp
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_dir(folder: str | Path, what: str = "output folder") -> Iterator[Path]:
    """A fresh empty folder beside ``folder`` for the block to fill; it replaces ``folder``
    (and whatever was in it) when the block ends, and is removed when it raises (anything).

    A symbolic link is written through (the folder it names is replaced, the link stays);
    anything but a folder at ``folder`` (a file, a device) is refused (:func:`write_target`).

    Args:
        folder: the folder to write.
        what: where the path was given, for the errors (e.g. ``--output``).

    Example:

        >>> with atomic_dir("runs/export", "--output") as tmp:  # doctest: +SKIP
        ...     model.save(tmp)
    """
    target = write_target(folder, what, folder=True)
    make_folder(target.parent)
    tmp = _beside(target)
    old = None
    try:
        with _naming(target, tmp):
            tmp.mkdir()
            yield tmp
            if target.is_dir():  # moved aside, then removed once the new one is in place
                old = _beside(target, "old")
                os.rename(target, old)
            try:
                os.replace(tmp, target)
            except BaseException:
                if old is not None:
                    os.rename(old, target)
                    old = None
                raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def write_text(path: str | Path, text: str, what: str = "output") -> Path:
    """``text`` (UTF-8) to ``path``, atomically (:func:`atomic_path`).

    Args:
        path: the file to write.
        text: its text.
        what: where the path was given, for the errors.

    Returns:
        ``path`` as a Path.
    """
    with atomic_path(path, what) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)
