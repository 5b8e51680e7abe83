"""Run a queue of `rqa` runs one after another, resumable, with a deadline: the command line
of retrieval_qa/sweeps/queue.py (the queue file's format and what each line does are in its
docstring), whose steps run on the one runner of retrieval_qa/sweeps/runner.py.

    python experiments/run_queue.py QUEUE --output-root runs/gpu [--deadline-s 540]
        [--through TITLE] [--train-overrides "key=value ..."] [--caps "data.KEY=N ..."]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: this checkout's package first
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from retrieval_qa.sweeps.queue import (  # noqa: E402,F401
    Run,
    cli,
    expand,
    is_done,
    main,
    parse_queue,
    plan,
    present,
    reusable,
    run_queue,
    through,
)

if __name__ == "__main__":
    cli()
