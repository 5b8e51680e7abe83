"""``rqa train``: compose conf/train.yaml, the experiment, its profile and the command line's
settings, then fit, export, test and report (:mod:`retrieval_qa.training.run`)."""

from __future__ import annotations

from .parsing import add_command


def add_parser(sub) -> None:
    """``rqa train``'s parser.

    Args:
        sub: the subparsers of ``rqa``.
    """
    tr = add_command(sub, "train", run=run, threads="config", epilog=_epilog,
                     help="train a method: rqa train experiment=NAME [profile=paper|cpu|gpu] "
                          "(default paper)",
                     description="Train a method: compose conf/train.yaml, the experiment, "
                                 "its profile and KEY=VALUE settings; fit, export the best "
                                 "checkpoint, evaluate it on the test pool and print the "
                                 "report.")
    tr.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                    help="experiment=NAME (required), profile=paper|cpu|gpu (default paper), "
                         "then any config key, e.g. seed=2 trainer.max_steps=200")
    tr.add_argument("--cfg", action="store_true",
                    help="print the composed config without training, each value followed by "
                         "where it came from (conf/train.yaml, a group file, the experiment, "
                         "its profile, an `extends:` parent, or the command line)")


def overrides(args, quiet: bool = False) -> list[str]:
    """The command line's settings (of ``rqa train`` or ``rqa export``), and those its options
    stand for unless the settings say otherwise: ``rqa --threads N`` is ``threads=N``, and
    with ``quiet`` :data:`~retrieval_qa.progress.QUIET_TRAINING` (recorded in the run's
    config.yaml, as any setting).

    Args:
        args: the parsed options.
        quiet: ``rqa train --quiet`` was given.
    """
    from ..progress import QUIET_TRAINING

    given = list(args.overrides)
    keys = {o.split("=", 1)[0] for o in given}
    implied = [f"threads={args.threads}"] if args.threads else []
    if quiet:
        implied += QUIET_TRAINING
    return given + [o for o in implied if o.split("=", 1)[0] not in keys]


def run(args) -> dict | str:
    """``rqa train``: compose the config and train (or print it with ``--cfg``).

    Args:
        args: the parsed options.
    """
    from ..config import compose_traced

    composed = compose_traced(overrides(args, quiet=args.quiet))  # checked before Lightning is imported
    if args.cfg:  # what would run, each value with its source; nothing trained
        from ..config import annotated_yaml

        return annotated_yaml(composed.cfg, composed.sources())
    from ..training.run import train

    return train(composed)


def _epilog() -> str:
    from ..config import experiment_profiles

    profiles = experiment_profiles()
    width = max(map(len, profiles)) if profiles else 0
    rows = "\n".join(f"  {name:<{width}}  {', '.join(p)}" for name, p in profiles.items())
    return f"""\
examples:
  rqa train experiment=dual_gru profile=cpu          # minutes on a laptop CPU
  rqa train experiment=endx_gru profile=cpu trainer.max_steps=200 output_dir=runs/smoke
                                                     # a short run, in a folder of its own
  rqa train experiment=dual_bert                     # the paper's settings (profile=paper)
  rqa train --quiet experiment=dual_gru profile=cpu  # no progress bar, no model summary

experiments (conf/experiment/) and their profiles:
{rows}

Settings are key=value over the composed config (conf/train.yaml and its groups): a key
that does not exist, or a value of another type than the key's default, is an error before
anything runs. A run writes runs/<experiment>/<profile>-seed<seed>/ (the folder does not
depend on the other settings) and, run again with the same settings, resumes from its last
checkpoint, or reuses its result when finished ("reused" on stderr). A folder holding a run
of other settings is refused before anything is written, naming the settings that differ:
output_dir=DIR gives the run a folder of its own, resume=never starts that folder over."""
