"""Files written whole or not at all: a temporary file beside the target, then renamed over
it, so a crash mid-write leaves the previous file (or none), never half of one."""

from __future__ import annotations

import os
from pathlib import Path


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through ``<path>.partial``."""
    path = Path(path)
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
