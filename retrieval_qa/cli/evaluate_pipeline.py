"""``rqa evaluate --pipeline NAME [--from-run-files DIR] [--cfg] [KEY=VALUE ...]``: the options
of a retrieval pipeline (conf/pipeline/) and its run (:mod:`retrieval_qa.pipeline.run`)."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConflictingOptionsError, InputFileError
from .pools import load

DEFAULT_RUN_DIR = "runs/pipeline"


def add_arguments(p) -> None:
    """The options of a retrieval pipeline.

    Args:
        p: the parser of ``rqa evaluate``.
    """
    p.add_argument("--pipeline", default=None, metavar="NAME",
                   help="run a retrieval pipeline: conf/pipeline/NAME.yaml or a .yaml path "
                        "(first-stage retrievers, fusion, reranker); its run files go to "
                        "--pipeline-dir")
    p.add_argument("--pipeline-dir", default=None, metavar="DIR",
                   help="--pipeline: where its run files go, each with its per-question "
                        "records for rqa compare, and the reranker's scores in shards (the "
                        "same command resumes a reranking stopped by a crash; default: "
                        f"{DEFAULT_RUN_DIR}/NAME)")
    p.add_argument("--from-run-files", default=None, metavar="DIR",
                   help="--pipeline: read the first-stage lists from the run files a previous "
                        "run wrote to DIR (its --pipeline-dir) instead of running the "
                        "retrievers: fusion and reranking without re-encoding")
    p.add_argument("--max-questions", type=int, default=None, metavar="N",
                   help="--pipeline: evaluate a seeded subset of N questions (every candidate "
                        "kept; seed: the pipeline's tuning.split_seed)")
    p.add_argument("--cfg", action="store_true",
                   help="--pipeline: print the composed pipeline without running it, each "
                        "value followed by where it came from (conf/pipeline.yaml, the file, "
                        "an `extends:` parent, a stage's conf/pipeline/stages file, or the "
                        "command line's KEY=VALUE settings)")


def wanted(args) -> bool:
    """Whether any option of a pipeline is given (without --pipeline: an error in :func:`run`).

    Args:
        args: the parsed options.
    """
    return bool(args.pipeline or args.from_run_files or args.pipeline_dir or args.max_questions
                or args.cfg)


def run(args, eval_cfg) -> dict:
    """``rqa evaluate --pipeline``: run the pipeline on the pool (or print its config
    with ``--cfg``).

    Args:
        args: the parsed options.
        eval_cfg: the ``eval`` settings (conf/eval/default.yaml).
    """
    if not args.pipeline:
        raise ConflictingOptionsError("--from-run-files / --pipeline-dir / --max-questions / "
                                      "--cfg belong to --pipeline (fix: add --pipeline NAME)")
    other = [o for o, v in (("--model", args.model), ("--checkpoint", args.checkpoint),
                            ("--run-file", args.run_file), ("--work-dir", args.work_dir))
             if v]
    if other:
        raise ConflictingOptionsError(
            f"--pipeline {args.pipeline} does not combine with {other}: the pipeline's config "
            "names its retrievers and settings (fix: drop them, or edit the conf/pipeline "
            "file, or give its keys as KEY=VALUE)")
    from ..pipeline.composition import load_pipeline

    cfg = load_pipeline(args.pipeline, args.overrides)
    if args.cfg:  # what would run, each value with its source; nothing run
        return cfg.annotated()
    if args.from_run_files and not Path(args.from_run_files).is_dir():
        raise InputFileError("--from-run-files", args.from_run_files, "is not a folder",
                             "give the --pipeline-dir of an earlier rqa evaluate --pipeline")
    pool, _ = load(args)
    if args.max_questions:
        from ..pipeline.tuning import question_subset

        pool = question_subset(pool, args.max_questions, cfg.tuning.split_seed)
    from ..pipeline.run import run_pipeline

    run_dir = args.pipeline_dir or f"{DEFAULT_RUN_DIR}/{cfg.name}"
    return run_pipeline(cfg, pool, run_dir, from_run_files=args.from_run_files,
                        data_dir=args.data_dir, evaluation=eval_cfg, progress=not args.quiet)
