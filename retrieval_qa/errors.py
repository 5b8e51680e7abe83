"""The errors ``rqa`` reports as one line on stderr with exit status 2 (bad input: an option,
an override, a file), and the stop of an interrupted run. Light on purpose: the command line
imports this module before it parses its arguments, so it imports nothing heavy."""

from __future__ import annotations

import errno
import signal
from collections.abc import Iterable
from pathlib import Path


def did_you_mean(name: object, choices: Iterable[object]) -> str:
    """The names of ``choices`` close to a mistyped ``name`` as ``"did you mean 'x'? "`` (or
    ``'x' or 'y'``), to put before the list of choices in an error; "" when none is close.

    Args:
        name: the mistyped name.
        choices: the valid names.

    Example:

        >>> did_you_mean("dual_gruu", ["dual_gru", "endx_gru", "sde"])
        "did you mean 'dual_gru'? "
    """
    import difflib

    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=3)
    return f"did you mean {' or '.join(map(repr, close))}? " if close else ""


class UsageError(ValueError):
    """Bad input from the user. The message names what is wrong (the option, the config key,
    the file and its record) and how to fix it; ``rqa`` prints it and exits with status 2."""


class OverrideError(UsageError):
    """A ``key=value`` override (of ``rqa train``, ``rqa export``, ``rqa evaluate``) whose
    value does not fit the setting it replaces.

    Args:
        item: the override as given (``key=value``).
        key: its key.
        problem: what is wrong with the value.
        fix: how to fix it.
    """

    def __init__(self, item: str, key: str, problem: str, fix: str) -> None:
        self.item, self.key = item, key
        super().__init__(f"override {item!r}: {problem} (fix: {fix})")


class OutOfRangeError(UsageError):
    """A setting whose value is outside the range that ``conf/ranges.yaml`` allows it.

    Args:
        key: the setting's key.
        value: the value given, as text.
        source: where the value was set (the command line, a config file).
        allowed: the range, in words.
        declared_in: the file that declares the range.
        fix: how to fix it.
    """

    def __init__(self, key: str, value: str, source: str, allowed: str, declared_in: str,
                 fix: str) -> None:
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"{key}={value} ({source}) is out of range: {key} takes {allowed} "
                         f"(its range in {declared_in}; fix: {fix})")


class UnknownKeyError(UsageError, KeyError):
    """A config key (in an override or a config file) that the composed config does not
    have. A KeyError too, for the callers that catch that."""

    __str__ = BaseException.__str__  # the message as written, not KeyError's repr of it


class ConflictingOptionsError(UsageError):
    """Options that cannot be given together."""


class InputFileError(UsageError):
    """A file that is missing, empty, unreadable or not of the kind expected; the message
    names where it was given, the file, the record when there is one, and the fix.

    Args:
        what: where it was given (an option such as ``--run-file``, or "config file").
        path: the file.
        problem: what is wrong (with the record, when there is one).
        fix: how to fix it.
    """

    def __init__(self, what: str, path, problem: str, fix: str) -> None:
        self.what, self.path = what, str(path)
        super().__init__(f"{what} {self.path}: {problem} (fix: {fix})")


class SettingsMismatchError(UsageError):
    """An output folder (a run, a mining job, a pipeline's run files) written under other
    settings than the command's: it is neither resumed nor reused.

    Args:
        folder: the output folder.
        differences: ``{key: (old, new)}`` of the settings that differ.
        message: the error's message (naming the differences and the fix).
    """

    def __init__(self, folder, differences: dict, message: str) -> None:
        self.folder, self.differences = str(folder), differences
        super().__init__(message)


class RunInterrupted(Exception):
    """The run was stopped by a signal after saving a resumable checkpoint.

    Args:
        signum: the signal's number (the exit status is 128 + it).
        checkpoint: the resumable checkpoint saved; None: none could be saved.
        global_step: the step it was saved at.
    """

    def __init__(self, signum: int, checkpoint: str | None, global_step: int):
        self.signum = signum
        self.checkpoint = checkpoint
        self.global_step = global_step
        name = signal.Signals(signum).name
        where = (f"saved a resumable checkpoint at step {global_step}: {checkpoint}"
                 if checkpoint else "no checkpoint could be saved")
        super().__init__(f"stopped by {name}; {where}. Run the same command again to resume.")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class Stopped(BaseException):
    """The command was stopped by a signal (SIGINT: Ctrl-C, SIGTERM) outside a training run's
    own handling (which saves a checkpoint and raises :class:`RunInterrupted`). A
    BaseException, like KeyboardInterrupt, so no ``except Exception`` swallows it and every
    write in progress removes its temporary file on the way out; ``rqa`` prints one line and
    exits with status 128+N.

    Args:
        signum: the signal's number (the exit status is 128 + it).
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name}; what was being written "
                         "was not left half-written. Run the same command again to redo it.")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class NonFiniteLossError(FloatingPointError):
    """A training loss that is NaN or infinite; the message names the step, epoch and batch and
    what to try (``rqa`` prints it as one line, exit status 2)."""


#: the errors of the machine a write (or read) meets, each with its fix: ``rqa`` reports them
#: as one line naming the path (:func:`machine_fault`), exit status 2
MACHINE_FAULTS = {
    errno.ENOSPC: "free space on that disk, or write to a folder on another disk",
    errno.EDQUOT: "free space within your disk quota, or write to a folder elsewhere",
    errno.EACCES: "make it writable (check its and its folder's permissions), or choose "
                  "another folder",
    errno.EPERM: "make it writable (check its and its folder's permissions and owner), or "
                 "choose another folder",
    errno.EROFS: "the file system is read-only: choose a folder on a writable one",
    errno.ENOTDIR: "a part of the path is a file, not a folder: choose another path",
    errno.ENOENT: "its folder does not exist (or was removed meanwhile): create it, or choose "
                  "another path",
    errno.EISDIR: "it is a folder: give the path of a file",
    errno.ELOOP: "a loop of symbolic links: repair the link, or choose another path",
}


def machine_fault(e: OSError) -> str | None:
    """The one line (without ``rqa: error:``) for an OSError of the machine: a full disk, a
    read-only or unwritable folder, a file where a folder should be (:data:`MACHINE_FAULTS`),
    naming the path and the fix; None for another error.

    Args:
        e: the error; its ``filename`` is the path named (the writers of
            :mod:`retrieval_qa.written` set it to the file being written).

    Example:

        >>> machine_fault(OSError(errno.ENOSPC, "No space left on device", "runs/r.jsonl"))
        'runs/r.jsonl: No space left on device (fix: free space on that disk, or write to a folder on another disk)'
    """
    fix = MACHINE_FAULTS.get(e.errno)
    if fix is None:
        return None
    what = e.strerror or errno.errorcode.get(e.errno, str(e.errno))
    if e.filename is not None:
        what = f"{e.filename}: {what}"
    import os

    cache = os.path.abspath(os.path.expanduser(os.environ.get("RQA_CACHE_DIR")
                                               or "~/.cache/retrieval_qa"))
    path = os.path.abspath(str(e.filename)) if e.filename is not None else ""
    if path == cache or path.startswith(cache + os.sep):
        fix += f"; it is in the cache folder {cache}: set RQA_CACHE_DIR to another one"
    return f"{what} (fix: {fix})"


class DataFormatError(ValueError):
    """A record of an input file is malformed.

    The message always carries the file, the record (an id, a line number or a JSON path),
    what is wrong and how to fix it, so a user can find the line and repair or skip it.

    Args:
        path: the file.
        record: the record (an id, a line number or a JSON path).
        problem: what is wrong.
        fix: how to fix it; "": no fix in the message.
    """

    def __init__(self, path: str | Path, record: str, problem: str, fix: str = "") -> None:
        self.path = str(path)
        self.record = record
        self.problem = problem
        self.fix = fix
        message = f"{self.path}: {record}: {problem}"
        if fix:
            message += f" (fix: {fix})"
        super().__init__(message)


class DataDirNotFoundError(FileNotFoundError):
    """A data folder given explicitly (--data-dir, $RQA_DATA_DIR, data.data_dir) does not
    exist: it is never silently replaced by another folder.

    Args:
        path: the folder.
        given_by: what gave it (``--data-dir``, ``$RQA_DATA_DIR``, ``data.data_dir``).
    """

    def __init__(self, path: str | Path, given_by: str) -> None:
        self.path = str(path)
        self.given_by = given_by
        super().__init__(
            f"data folder {self.path} (from {given_by}) does not exist. Fix {given_by}, or "
            "leave it unset to use ../shared/data beside the repository.")


class DataFileNotFoundError(FileNotFoundError):
    """A data file is missing: says which file, where it looked and how to get it.

    Args:
        name: the file's name.
        looked: the places looked in.
        how_to_get: a sentence saying how to get the file.
    """

    def __init__(self, name: str, looked: list[Path], how_to_get: str) -> None:
        self.name = name
        self.looked = [str(p) for p in looked]
        self.how_to_get = how_to_get
        places = ", ".join(self.looked) or "(no data directory configured)"
        super().__init__(
            f"data file {name!r} not found; looked in: {places}. {how_to_get} "
            "Point the project at the folder holding it with --data-dir, the RQA_DATA_DIR "
            "environment variable or `data.data_dir` in the config."
        )
