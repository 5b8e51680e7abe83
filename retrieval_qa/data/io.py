"""Opening JSON / JSON-lines files, plain or gzip, with errors that name the file and line."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ..errors import DataFormatError


def open_text(path: str | Path) -> IO[str]:
    """A UTF-8 text file, read through gzip when its name ends in ``.gz``.

    Args:
        path: the file.
    """
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def load_json(path: str | Path) -> Any:
    """A JSON file (plain or gzip); a DataFormatError naming the line and the fix when
    it is not JSON or not readable.

    Args:
        path: the file.
    """
    try:
        with open_text(path) as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise DataFormatError(
            path, f"line {e.lineno} column {e.colno}", f"invalid JSON: {e.msg}",
            "re-download the file; a truncated download is the usual cause",
        ) from e
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise unreadable(path, e) from e


def unreadable(path: str | Path, e: Exception) -> DataFormatError:
    """The error for a file that cannot be decoded, with the fix for its cause.

    Args:
        path: the file.
        e: what reading it raised.
    """
    if isinstance(e, UnicodeDecodeError):
        return DataFormatError(path, f"byte {e.start}", f"not UTF-8 text: {e.reason}",
                               "re-encode the file as UTF-8 (e.g. iconv -t UTF-8)")
    return DataFormatError(path, "whole file", f"cannot be read: {e}",
                           "check the file is complete and (for .gz) really gzip; "
                           "re-download a truncated file")


def iter_json_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield (1-based line number, parsed object) for every non-blank line.

    Args:
        path: a JSON-lines file (plain or gzip).
    """
    try:
        with open_text(path) as f:
            for lineno, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    yield lineno, json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataFormatError(path, f"line {lineno}", f"invalid JSON: {e.msg}",
                                          "repair or remove that line") from e
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise unreadable(path, e) from e


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    """The sha256 of a file's bytes, in hex.

    Args:
        path: the file.
        chunk: bytes read at a time.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
