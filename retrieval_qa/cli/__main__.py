"""``python -m retrieval_qa.cli``: the ``rqa`` command."""

from .main import run

raise SystemExit(run())
