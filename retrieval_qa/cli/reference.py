"""The command-line reference (docs/cli-reference.md), generated from the parsers of
:func:`retrieval_qa.cli.build_parser`, so it cannot drift from what ``rqa --help`` says.

    python -m retrieval_qa.cli.reference > docs/cli-reference.md
"""

from __future__ import annotations

import argparse
import os

from .main import build_parser

WIDTH = 100  # the help is wrapped at a fixed width, whatever the terminal


def _subcommands(parser: argparse.ArgumentParser, prefix: str):
    """(``rqa data stats``, parser) for every parser under ``parser``, depth first."""
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _subcommands(sub, f"{prefix} {name}")


def reference() -> str:
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH)
    try:
        parts = ["# `rqa` command reference", "",
                 "Generated from the parsers by `python -m retrieval_qa.cli.reference` "
                 "(`make docs`); a test fails when this file is out of date. Conventions, "
                 "errors and examples: [cli.md](cli.md).", ""]
        for name, parser in _subcommands(build_parser(), "rqa"):
            parser.prog = name
            parts += [f"## `{name}`", "", "```text", parser.format_help().rstrip(), "```", ""]
        return "\n".join(parts)
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous


if __name__ == "__main__":
    print(reference(), end="")
