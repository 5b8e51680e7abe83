"""Progress of a command's stages on stderr, one display per stage: a stage without a count
(building a pool, a BM25 index) is one line, "NAME ..." when it starts, completed with what
it did and its time when it ends (in a log: the finished line only); a stage with a count (retrieval, encoding) is a tqdm bar
whose description names the stage."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

#: what ``--quiet`` turns off in a training (``rqa train``, a sweep's runs), as settings over
#: the composed config, so the run's config.yaml records them: the progress bar and the model
#: summary (both display only: NEUTRAL_KEYS of retrieval_qa/training/run_folder.py)
QUIET_TRAINING = ("trainer.enable_progress_bar=false",
                  "trainer.callbacks.model_summary.max_depth=0")


@dataclass
class Stage:
    """One stage of :func:`stage`, whose body may set what it did.

    Attributes:
        name: the stage's name, shown first.
        done: what the stage did ("read from the cache").
        detail: counts, appended after the time.
    """
    name: str
    done: str = "done"    # what the stage did, set by its body ("read from the cache")
    detail: str = ""      # counts, appended after the time


@contextlib.contextmanager
def stage(name: str, enabled: bool = True) -> Iterator[Stage]:
    """``with stage("pool reqa_squad/dev") as s: ...; s.done = "built"`` shows
    ``pool reqa_squad/dev ... built in 3.2 s`` on stderr (nothing when not ``enabled``). On a
    terminal ``NAME ...`` shows while the stage runs and is completed in place; in a log, the
    completed line alone is written. A stage that fails leaves no line (the error says what
    went wrong).

    Args:
        name: the stage's name.
        enabled: False: show nothing.
    """
    s = Stage(name)
    if not enabled:
        yield s
        return
    live = sys.stderr.isatty()
    if live:
        sys.stderr.write(f"{name} ...")
        sys.stderr.flush()
    start = time.perf_counter()
    try:
        yield s
    except BaseException:
        if live:
            sys.stderr.write("\r\033[K")  # erase the line
        raise
    detail = f": {s.detail}" if s.detail else ""
    sys.stderr.write(("\r" if live else "")
                     + f"{name} ... {s.done} in {time.perf_counter() - start:.1f} s{detail}\n")
    sys.stderr.flush()


#: what ``--quiet`` sets for the libraries a command imports (and the processes it starts):
#: transformers' log lines at error level only
QUIET_ENVIRONMENT = {"TRANSFORMERS_VERBOSITY": "error"}


_QUIET = [False]


def is_quiet() -> bool:
    """Whether the running command was given ``--quiet`` (its own notes on stderr, such as
    ``rqa train``'s banner, are left out too; the result line and errors still print)."""
    return _QUIET[0]


@contextlib.contextmanager
def quiet_libraries(enabled: bool = True) -> Iterator[None]:
    """``--quiet`` for the libraries: while the command runs, no log line below WARNING
    (Lightning's "GPU available ...", "`Trainer(limit_train_batches=1.0)` was configured ...",
    "Seed set to ...", whatever logger they use) and no progress bar of Hugging Face
    (transformers' "Loading weights", the hub's downloads); warnings and errors still show.
    Everything is as it was afterwards (a process may run several commands: the tests).

    Args:
        enabled: False: a no-op (a command run without ``--quiet``).
    """
    if not enabled:
        yield
        return
    import huggingface_hub.utils as hub  # cheap, unlike transformers

    hf = sys.modules.get("transformers.utils.logging")
    bars = not hub.are_progress_bars_disabled()
    hf_state = (hf.get_verbosity(), hf.is_progress_bar_enabled()) if hf is not None else None
    environment = {k: os.environ.get(k) for k in QUIET_ENVIRONMENT}
    level = logging.root.manager.disable
    os.environ.update(QUIET_ENVIRONMENT)
    hub.disable_progress_bars()  # transformers takes the hub's state when it is imported
    if hf is not None:
        hf.set_verbosity_error()
        hf.disable_progress_bar()
    logging.disable(logging.INFO)
    _QUIET[0] = True
    try:
        yield
    finally:
        _QUIET[0] = False
        logging.disable(level)
        for key, value in environment.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        hf = sys.modules.get("transformers.utils.logging")
        if hf is not None:  # imported before, or during the command (at error level then)
            verbosity, hf_bars = hf_state or (hf._get_default_logging_level(), bars)
            hf.set_verbosity(verbosity)
            (hf.enable_progress_bar if hf_bars else hf.disable_progress_bar)()
        (hub.enable_progress_bars if bars else hub.disable_progress_bars)()
