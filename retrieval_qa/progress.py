"""Progress of a command's stages on stderr, one display per stage: a stage without a count
(building a pool, a BM25 index) is one line, "NAME ..." when it starts, completed with what
it did and its time when it ends (in a log: the finished line only); a stage with a count (retrieval, encoding) is a tqdm bar
whose description names the stage."""

from __future__ import annotations

import contextlib
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
    name: str
    done: str = "done"    # what the stage did, set by its body ("read from the cache")
    detail: str = ""      # counts, appended after the time


@contextlib.contextmanager
def stage(name: str, enabled: bool = True) -> Iterator[Stage]:
    """``with stage("pool reqa_squad/dev") as s: ...; s.done = "built"`` shows
    ``pool reqa_squad/dev ... built in 3.2 s`` on stderr (nothing when not ``enabled``). On a
    terminal ``NAME ...`` shows while the stage runs and is completed in place; in a log, the
    completed line alone is written. A stage that fails leaves no line (the error says what
    went wrong)."""
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
