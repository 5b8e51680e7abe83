"""``rqa sweep FILE``: a sweep file in wandb's format run here, without a wandb server."""

from __future__ import annotations

from ..sweeps.run import DEFAULT_OUTPUT_DIR, run_sweep  # light: nothing heavy at import
from .parsing import add_command, nonnegative_int, run_numbers

EXAMPLES = """\
examples:
  rqa sweep endx_confounds --dry-run          # list the runs of conf/sweeps/endx_confounds.yaml
  rqa sweep conf/sweeps/vaes.yaml --count 2   # run two of the runs not finished yet"""


def add_parser(sub) -> None:
    """``rqa sweep``'s parser.

    Args:
        sub: the subparsers of ``rqa``.
    """
    sw = add_command(sub, "sweep", run=run, epilog=EXAMPLES,
                     help="run a wandb sweep file here, without a wandb server: each run "
                          "`rqa train` with wandb offline, resumable",
                     description="Run a sweep file in wandb's format here, without a wandb "
                                 "server: each run is `rqa train` with wandb offline; finished "
                                 "runs are kept, so the same command resumes.")
    sw.add_argument("file", help="a sweep file in wandb's format, or a name of conf/sweeps/")
    sw.add_argument("--count", type=nonnegative_int, default=None,
                    help="grid: run at most N of the runs not finished yet; random: the "
                         "number of settings to sample (required)")
    sw.add_argument("--runs", type=run_numbers, default=None, metavar="I,J,...",
                    help="run only these run numbers (as --dry-run lists them), in this order; "
                         "the rest stay for a later call")
    sw.add_argument("--dry-run", action="store_true",
                    help="list the runs, their commands and folders; run nothing")
    sw.add_argument("--output-dir", default=DEFAULT_OUTPUT_DIR,
                    help=f"runs go to OUTPUT_DIR/<sweep name>/<setting>/ (default "
                         f"{DEFAULT_OUTPUT_DIR})")
    sw.add_argument("--method", choices=["grid", "random"], default=None,
                    help="run with this method instead of the file's (e.g. a bayes sweep's "
                         "space sampled at random)")
    sw.add_argument("--seed", type=int, default=0, help="seed of random sampling (default 0)")
    sw.add_argument("--in-process", action="store_true",
                    help="run each `rqa train` in this process (saves the start-up of a "
                         "process per run, for tiny runs; default: a subprocess per run, as "
                         "`wandb agent` runs them)")


def run(args) -> dict:
    """``rqa sweep``: run (or list, with ``--dry-run``) the sweep's runs.

    Args:
        args: the parsed options.
    """
    return run_sweep(args.file, count=args.count, dry_run=args.dry_run,
                     output_dir=args.output_dir, method=args.method, seed=args.seed,
                     threads=args.threads, in_process=args.in_process, only=args.runs,
                     quiet=args.quiet)
