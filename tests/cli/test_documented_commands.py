"""Every `rqa ...` command line of README.md, docs/*.md and docs/papers/*.md parses with the
real parser (argparse only: nothing runs), so a documented command or option that no longer
exists fails here.

Which lines, and how each is checked:

- In fenced code blocks (bash, sh or no language): every line whose first word is ``rqa``
  (a trailing backslash continues it, ``# ...`` is a comment). In ``text`` blocks (the help
  output of docs/cli-reference.md): the indented lines of its "example(s):" paragraphs.
  These are full commands: parsed as a whole (``key=value`` settings are positionals, as
  for argparse); a line ending in ``--help`` parses up to it.
- Inline code spans starting with ``rqa `` outside the blocks (headings included): parsed
  as a whole when they reach a command that runs, give more than its command words and do
  not end in an option waiting for its value; otherwise (``rqa compare``,
  ``rqa evaluate --refiner``, ``rqa --threads N``) they name a command or an option, and
  each named one must exist.
- Placeholders: from a word ``...`` on, the line is not a full command: the command words
  before it must exist, and every ``--option`` anywhere in it must be an option of that
  command. An all-capitals word where a command word belongs (``rqa COMMAND --help``,
  ``rqa analyze ANALYSIS``) ends the check there. Capitalised values (``--checkpoint DIR``)
  are ordinary values to argparse and need no rule.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path
from typing import NamedTuple

import pytest

from retrieval_qa.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "docs" / "papers").glob("*.md"))]
FENCE = re.compile(r"^\s*(```|~~~)\s*(\w*)")
INLINE = re.compile(r"`(rqa [^`]*)`")
SHELL = ("", "bash", "sh", "shell", "console")


def _words(text: str) -> list[str]:
    return shlex.split(text.replace("\\|", "|"), comments=True)


def documented(path: Path) -> list[tuple[str, list[str], bool]]:
    """(where, words after ``rqa``, inline) of every documented command line of ``path``."""
    found, prose, lines = [], [], path.read_text(encoding="utf-8").splitlines()
    fence, example, pending = None, False, ""
    for number, line in enumerate(lines, 1):
        where = f"{path.relative_to(ROOT)}:{number}"
        match = FENCE.match(line)
        if match and fence is None:
            fence, example = match.group(2), False
            continue
        if match and fence is not None:
            fence = None
            continue
        if fence is None:
            prose.append((number, line))
            continue
        if fence == "text":  # help output: the indented lines of its example paragraphs
            example = bool(line.strip()) and (example or line.startswith(("example:",
                                                                          "examples:")))
            if not (example and line.startswith(" ")):
                continue
        elif fence not in SHELL:
            continue
        text = pending + line.strip()
        if text.endswith("\\"):
            pending = text[:-1] + " "
            continue
        pending = ""
        if text.startswith("$ "):
            text = text[2:]
        if text.split(" ", 1)[0] == "rqa":
            found.append((where, _words(text)[1:], False))
    text = "\n".join(line for _, line in prose)
    starts = [n for n, _ in prose]
    for match in INLINE.finditer(text):
        number = starts[text.count("\n", 0, match.start())]
        found.append((f"{path.relative_to(ROOT)}:{number}",
                      _words(" ".join(match.group(1).split()))[1:], True))
    return found


COMMANDS = [c for doc in DOCS for c in documented(doc)]


def _subcommands(parser) -> dict:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


class Named(NamedTuple):
    problems: list[str]          # a command word or an option that does not exist
    parser: argparse.ArgumentParser  # the command the words reach
    path: list[str]              # its words: rqa, command, subcommand
    waiting: bool                # the last word is an option still waiting for its value
    placeholder: bool            # a placeholder stood where a command word belongs


def _named(words: list[str]) -> Named:
    """``words`` read as names of commands and options."""
    parser, path, problems, waiting = build_parser(), ["rqa"], [], False
    for word in words:
        if word == "...":
            continue
        if word.startswith("-"):
            action = parser._option_string_actions.get(word.split("=", 1)[0])
            if action is None:
                problems.append(f"`{' '.join(path)}` has no option {word}")
            waiting = action is not None and action.nargs != 0 and "=" not in word
            continue
        if waiting:  # the option's value
            waiting = False
            continue
        choices = _subcommands(parser)
        if not choices:
            continue  # a positional: a setting, a file
        if word.isupper():  # a placeholder: COMMAND, ANALYSIS
            return Named(problems, parser, path, False, True)
        if word not in choices:
            problems.append(f"`{' '.join(path)}` has no command {word!r}")
            break
        parser = choices[word]
        path.append(word)
    return Named(problems, parser, path, waiting, False)


def _parse(words: list[str]) -> str | None:
    """argparse's error for ``words``, or None when they parse."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            build_parser().parse_args(words)
    except SystemExit as e:
        if e.code == 0 and "--help" in words:
            return None
        return err.getvalue().strip() or f"exit {e.code}"
    return None


def test_the_docs_have_command_lines_of_every_kind():
    assert len(COMMANDS) > 60
    assert any(not inline for _, _, inline in COMMANDS)
    assert any(inline for _, _, inline in COMMANDS)
    commands = {words[0] for _, words, _ in COMMANDS if words and not words[0].startswith("-")}
    assert {"train", "evaluate", "export", "compare", "sweep", "analyze", "mine"} <= commands


@pytest.mark.parametrize("where,words,inline", COMMANDS,
                         ids=[f"{w} {' '.join(c)}"[:90] for w, c, _ in COMMANDS])
def test_every_documented_command_parses(where, words, inline):
    named = _named(words)
    assert not named.problems, f"{where}: rqa {' '.join(words)}: {'; '.join(named.problems)}"
    names_only = inline and (named.waiting or "func" not in named.parser._defaults
                             or len(named.path) == len(words) + 1)  # `rqa compare`
    if "..." in words or named.placeholder or names_only:
        return  # not a full command: the names it gives are checked above
    error = _parse(words)
    assert error is None, f"{where}: rqa {' '.join(words)}: {error}"


def test_the_checks_catch_what_they_are_for():
    assert _named(["evaluate", "--no-such-option"]).problems
    assert _named(["evalute"]).problems
    assert _named(["analyze", "ANALYSIS", "--help"]).placeholder
    assert _named(["evaluate", "--refiner"]).waiting
    assert _parse(["train", "--cfg", "experiment=dual_gru"]) is None
    assert _parse(["export", "experiment=sde"])  # --output is required
    assert _parse(["train", "--help"]) is None
