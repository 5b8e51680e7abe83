"""What every command's parser shares: the parser class (one-line errors, a "did you mean"
for a mistyped name), the help layout, the options every command takes (``--quiet``) and the
value types of the options."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ..errors import did_you_mean

#: the options every command takes, given to each command's parser as a parent
COMMON = argparse.ArgumentParser(add_help=False)
COMMON.add_argument("--quiet", action="store_true",
                    help="no progress displays on stderr (rqa train and a sweep's runs: no "
                         "progress bar, no model summary); errors and the JSON result still "
                         "print")
COMMON.add_argument("--result", default=None, metavar="FILE",
                    help="also write the JSON result to FILE (atomically, the machine's paths "
                         "named as on stdout): a long job's figures kept beside its log")


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line: the problem and where the help is (the
    usage is in ``--help``), exit status 2 as argparse's; a mistyped choice (a command, a
    dataset) names the close ones. An epilog may be a function, called when the help is
    shown (``rqa train``'s list of experiments reads conf/)."""

    def format_help(self) -> str:
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (fix: see `{self.prog} --help`)\n")

    def _check_value(self, action, value):
        if action.choices is not None and value not in action.choices:
            choices = list(action.choices)
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r}; {did_you_mean(value, choices)}"
                        f"choose from {', '.join(map(repr, choices))}")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions wrapped to the terminal, examples (paragraphs with indented lines) as
    written; each option's default appended to its help ("(default: ...)") unless the help
    already says it, or there is none to show (None, a flag's False, an empty list)."""

    def _fill_text(self, text, width, indent):
        import textwrap

        paragraphs = text.split("\n\n")
        return "\n\n".join(
            p if any(line.startswith(" ") for line in p.splitlines())
            else textwrap.fill(" ".join(p.split()), width, initial_indent=indent,
                               subsequent_indent=indent)
            for p in paragraphs)

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if ("default" in text.lower() or action.required or default is argparse.SUPPRESS
                or default is None or default is False or default == []):
            return text
        return f"{text} (default: %(default)s)"


def add_command(sub, name: str, *, run: Callable | None = None, threads: str = "apply",
                epilog=None, **kwargs) -> argparse.ArgumentParser:
    """A command (or a group of them, ``run`` None) with the shared help layout; a command
    takes the :data:`COMMON` options and runs ``run(args)``.

    Args:
        sub: the subparsers to add it to.
        name: the command's name.
        run: the function that runs it, given the parsed options; None: a group of commands.
        threads: what it does with ``rqa --threads`` before it runs: ``apply`` (set torch's
            threads), ``check`` (only check the value: a command without torch) or ``config``
            (the command applies its config's).
        epilog: the help's epilog (a string, or a function called when the help is shown).
        **kwargs: passed to ``add_parser`` (``help``, ``description``...).
    """
    parents = [COMMON] if run is not None else []
    parser = sub.add_parser(name, formatter_class=HelpFormatter, epilog=epilog,
                            parents=parents, **kwargs)
    if run is not None:
        parser.set_defaults(func=run, threads_rule=threads)
    return parser


def nonnegative_int(text: str) -> int:
    """An argparse type: a whole number >= 0.

    Args:
        text: the option's value.
    """
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return value


def run_numbers(text: str) -> list[int]:
    """An argparse type: comma-separated run numbers (``1,3``).

    Args:
        text: the option's value.
    """
    try:
        return [int(i) for i in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated run numbers, "
                                         "e.g. 1,3") from None


def ks(text: str) -> list[int]:
    """An argparse type: comma-separated ranks >= 1 (``1,5,10``).

    Args:
        text: the option's value.
    """
    try:
        values = [int(k) for k in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated ranks >= 1, "
                                         "e.g. 1,5,10")
    return values
