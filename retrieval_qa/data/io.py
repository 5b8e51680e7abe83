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
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def load_json(path: str | Path) -> Any:
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
    """The error for a file that cannot be decoded, with the fix for its cause."""
    if isinstance(e, UnicodeDecodeError):
        return DataFormatError(path, f"byte {e.start}", f"not UTF-8 text: {e.reason}",
                               "re-encode the file as UTF-8 (e.g. iconv -t UTF-8)")
    return DataFormatError(path, "whole file", f"cannot be read: {e}",
                           "check the file is complete and (for .gz) really gzip; "
                           "re-download a truncated file")


def iter_json_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield (1-based line number, parsed object) for every non-blank line."""
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
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
