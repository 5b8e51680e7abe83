"""The ``rqa`` command line: :mod:`.main` parses and dispatches; each command is one module
here with its parser (``add_parser``) and its ``run`` (``data``, ``evaluate`` with its
embeddings and pipeline modes, ``train``, ``sweep``, ``export``, ``encode``, ``metrics``,
``mine``, ``compare``, ``analyze``); :mod:`.parsing` holds what their parsers share
(``--quiet``, the help layout, one-line errors), :mod:`.pools` the data options.

Every command prints one JSON object on the last line of stdout; progress and logs go to
stderr. Bad input (an option, a config override, a file) ends with one line on stderr naming
it and the fix, and exit status 2. Heavy libraries (torch, Lightning, transformers) are
imported by the command that needs them, inside its ``run``, so ``rqa --help`` and an
argument error answer at once."""

from .main import build_parser, main, run

__all__ = ["build_parser", "main", "run"]
