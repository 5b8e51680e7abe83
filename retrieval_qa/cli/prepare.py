"""``rqa prepare``: the step a method runs before ``rqa train``, when it has one (the
distillation's teacher scores), found through the experiment's data module: a class whose
``_target_`` is ``data._target_`` and that has a ``prepare(cfg, rebuild=, progress=)``
classmethod. No method is named here: a new method with a preparation step needs no edit."""

from __future__ import annotations

from .parsing import add_command
from .train import overrides

EXAMPLES = """\
examples:
  rqa prepare experiment=distill profile=cpu     # the teacher's scores (resumable)
  rqa train experiment=distill profile=cpu       # then the training, the same settings
  rqa prepare experiment=distill profile=cpu --rebuild   # score the folder again"""


def add_parser(sub) -> None:
    """``rqa prepare``'s parser.

    Args:
        sub: the subparsers of ``rqa``.
    """
    pr = add_command(sub, "prepare", run=run, threads="config", epilog=EXAMPLES,
                     help="run a method's preparation step before rqa train (e.g. the "
                          "distillation's teacher scores); the same KEY=VALUE settings",
                     description="Run the preparation step of an experiment's data module "
                                 "(its `prepare`), composed exactly as `rqa train` composes "
                                 "it: resumable, refusing a folder of other settings. An "
                                 "experiment without one has nothing to prepare.")
    pr.add_argument("overrides", nargs="+", metavar="KEY=VALUE",
                    help="experiment=NAME profile=... and any rqa train setting")
    pr.add_argument("--rebuild", action="store_true",
                    help="start the step's output over (e.g. score the teacher again; "
                         "default: keep its finished work and resume)")


def run(args) -> dict:
    """The experiment's preparation step, or a note that it has none.

    Args:
        args: the parsed options.
    """
    from ..config import compose
    from ..registry import locate
    from ..runtime import apply_threads

    cfg = compose(overrides(args))
    data = locate(cfg.data._target_)
    step = getattr(data, "prepare", None)
    if not callable(step):
        return {"experiment": cfg.experiment, "prepared": False,
                "note": f"{cfg.data._target_} has no preparation step: rqa train runs "
                        f"experiment={cfg.experiment} directly"}
    apply_threads(cfg.threads)
    summary = step(cfg, rebuild=args.rebuild, progress=not args.quiet)
    return {"experiment": cfg.experiment, "prepared": True, **summary}
