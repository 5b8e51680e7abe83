"""Steady-state training steps/s of ``rqa train``: the same command, with the clock read after
a device synchronize at step 100 and at ``trainer.max_steps`` (compilation, CUDA-graph
recording and data set-up fall before step 100), printed as ``STEPRATE`` on stderr.

    python -m bench.bench_train_steps experiment=dual_bert profile=gpu trainer.max_steps=500 \\
        trainer.limit_val_batches=0 test_after_fit=false trainer.compile=reduce-overhead
"""

from __future__ import annotations

import sys
import time

import torch

from retrieval_qa.cli import main
from retrieval_qa.training.callbacks import ResumableCheckpoints

START = 100


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def install() -> dict:
    """Wrap the callback that sees every step; returns the marks it fills."""
    marks: dict[int, float] = {}
    original = ResumableCheckpoints.on_train_batch_end

    def hook(self, trainer, *args):
        original(self, trainer, *args)
        step = trainer.global_step
        if step in (START, trainer.max_steps):
            _sync()
            marks[step] = time.monotonic()
            if len(marks) == 2:
                rate = (trainer.max_steps - START) / (marks[trainer.max_steps] - marks[START])
                print(f"STEPRATE {rate:.2f} steps/s over steps {START}-{trainer.max_steps}",
                      file=sys.stderr, flush=True)

    ResumableCheckpoints.on_train_batch_end = hook
    return marks


if __name__ == "__main__":
    install()
    sys.exit(main(["train", *sys.argv[1:]]))
