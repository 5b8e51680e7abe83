"""The teacher's scores of the distillation lists, once, into their resumable folder (the
first of the two commands of the distilled dual encoder, conf/experiment/distill.yaml):

    python experiments/distill_teacher.py experiment=distill profile=cpu [key=value ...] \\
        [--rebuild] [--quiet]
    rqa train experiment=distill profile=cpu [the same key=value ...]

The overrides are `rqa train`'s (the same composed config: ``data.teacher`` says what to
score and where; ``data.*`` the training side; ``eval`` the first stage's ranking;
``threads``). Run it again after a crash: finished shards are kept, a damaged one is scored
again. A folder of other settings is refused (exit status 2); ``--rebuild`` scores it again
from scratch. Prints the folder's summary as one JSON object (retrieval_qa/distill/teacher.py).
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("overrides", nargs="+", metavar="KEY=VALUE",
                   help="experiment=distill profile=... and `rqa train` overrides")
    p.add_argument("--rebuild", action="store_true",
                   help="remove the folder's teacher scores and lists and compute them again")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    from retrieval_qa.errors import UsageError
    from retrieval_qa.registry import config_values
    from retrieval_qa.runtime import apply_threads
    from retrieval_qa.training.compose import compose

    try:
        cfg = compose(args.overrides)
        if "teacher" not in cfg.data:
            raise UsageError(f"experiment={cfg.experiment} has no data.teacher block (fix: "
                             "experiment=distill, or an experiment that extends it)")
        apply_threads(cfg.threads)
        from retrieval_qa.distill.teacher import score_teacher

        data = config_values(cfg.data)
        summary = score_teacher(data.pop("teacher"), data, config_values(cfg.eval),
                                rebuild=args.rebuild, progress=not args.quiet)
    except (UsageError, FileNotFoundError) as e:
        print(f"distill_teacher: {e}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
