"""Kept for earlier commands: ``rqa prepare`` is the distillation's first step now
(``rqa prepare experiment=distill profile=cpu [key=value ...] [--rebuild] [--quiet]``);
this forwards its arguments there."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from retrieval_qa.cli.main import main as rqa

    return rqa(["prepare", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
