"""An input file given with an option, checked before it is read."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputFileError


def input_file(option: str, path: str) -> Path:
    """``path`` given with ``option``, checked to be an existing file.

    Args:
        option: the option that gave ``path`` (named in the error).
        path: the file's path.
    """
    p = Path(path)
    if not p.exists():
        raise InputFileError(option, path, "does not exist", "check the path")
    if not p.is_file():
        raise InputFileError(option, path, "is a folder, not a file", "give the file's path")
    return p
