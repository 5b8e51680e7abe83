"""``rqa results``: the tables of what results/ establishes, regenerated from the committed
records (:mod:`retrieval_qa.analysis.claims`)."""

from __future__ import annotations

from pathlib import Path

from .parsing import add_command

EXAMPLES = """\
examples:
  rqa results            # rewrite the generated tables of results/*/README.md, README.md and
                         # docs/results.md from results/*/claims.yaml and their records
  rqa results --check    # exit status 1 when a table differs from its records"""


def add_parser(sub) -> None:
    """``rqa results``' parser.

    Args:
        sub: the subparsers of ``rqa``.
    """
    res = add_command(sub, "results", run=run, threads="check", epilog=EXAMPLES,
                      help="regenerate the results tables from the committed records",
                      description="Each results/<study>/claims.yaml names its figures and the "
                                  "committed record each is computed from; this command "
                                  "computes them and writes the tables between <!-- claims:"
                                  "NAME --> markers of the study READMEs, README.md and "
                                  "docs/results.md, with each figure's test-pool looks from "
                                  "results/ledger.jsonl.")
    res.add_argument("--check", action="store_true",
                     help="write nothing; exit status 1 when a table is not what its records "
                          "give")
    res.add_argument("--repo", default=".", metavar="DIR",
                     help="the repository (its results/, README.md and docs/)")


def run(args) -> dict:
    """Render (or, with ``--check``, compare) every generated table.

    Args:
        args: the parsed options.
    """
    from ..analysis.results_tables import render, stray_figures
    from ..errors import InputFileError

    repo = Path(args.repo)
    if not any((repo / "results").glob("*/claims.yaml")):
        raise InputFileError("--repo", repo, "holds no results/*/claims.yaml",
                             "run it from the repository, or give --repo the repository")
    diffs = render(repo / "results", repo, write=not args.check)
    files = [repo / "README.md", repo / "docs" / "results.md",
             *sorted((repo / "results").glob("*/README.md"))]
    stray = {str(p.relative_to(repo)): s for p in files if p.is_file()
             for s in [stray_figures(p)] if s}
    failed = bool(stray) or (args.check and bool(diffs))
    return {"checked" if args.check else "written": sorted(diffs), "differences": diffs,
            "figures_without_record": stray, "exit_code": 1 if failed else 0}
