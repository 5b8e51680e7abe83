"""``rqa export``: an experiment's model before training (a baseline), or an exported model
converted to a sentence-transformers folder."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConflictingOptionsError, InputFileError
from .parsing import add_command
from .train import overrides

EXAMPLES = """\
examples:
  rqa export --output runs/untrained-gru experiment=dual_gru profile=cpu   # untrained baseline
  rqa export --output runs/off_the_shelf experiment=dual_bert profile=cpu  # off-the-shelf MiniLM
  rqa export --checkpoint runs/dual_bert/cpu-seed42/model --format sentence-transformers \\
      --output runs/st
  rqa export --output runs/untrained-gru --overwrite experiment=dual_gru profile=cpu  # replace it"""


def add_parser(sub) -> None:
    """``rqa export``'s parser.

    Args:
        sub: the subparsers of ``rqa``.
    """
    from ..export import EXPORT_FORMATS, ST_MODULES

    ex = add_command(sub, "export", run=run, threads="config", epilog=EXAMPLES,
                     help="export an experiment's model before training (a baseline), or "
                          "convert an exported model (--checkpoint) to sentence-transformers",
                     description="Export an experiment's model as initialised, before any "
                                 "training (a baseline for rqa evaluate / encode: random towers "
                                 "untrained, a pretrained encoder such as the packaged MiniLM "
                                 "off-the-shelf, as its authors trained it), or convert an "
                                 "exported model (--checkpoint) to a sentence-transformers "
                                 "folder.")
    ex.add_argument("--output", required=True,
                    help="folder for the inference model; written whole or not at all, and "
                         "one that holds anything (an earlier export) is refused unless "
                         "--overwrite")
    ex.add_argument("--overwrite", action="store_true",
                    help="replace the --output folder and everything in it (an earlier "
                         "export) when it is not empty")
    ex.add_argument("--format", choices=EXPORT_FORMATS, default="rqa",
                    help="rqa: this suite's folder (rqa evaluate / encode); sentence-transformers:"
                         " a folder SentenceTransformer(path) loads (see --st-modules)")
    ex.add_argument("--st-modules", choices=ST_MODULES, default="auto",
                    help="sentence-transformers only. auto: its own modules (Transformer, "
                         "Pooling, Dense, Normalize, Router: no retrieval_qa or remote code "
                         "needed to load) where they express the towers (a pretrained encoder, "
                         "mean or CLS pooling, a projection), else this package's "
                         "RetrievalTower module (load with trust_remote_code=True); native: "
                         "an error instead of that fallback; custom: always RetrievalTower")
    ex.add_argument("--checkpoint", default=None, metavar="DIR",
                    help="an exported model folder to convert (the `checkpoint` of rqa train); "
                         "without it the experiment's model is exported before training")
    ex.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                    help="without --checkpoint: experiment=NAME, profile=..., key=value as for "
                         "rqa train")


def _holds(folder: Path) -> str:
    """What a folder holds, in words: an export, a sentence-transformers folder, N entries."""
    if (folder / "model.json").is_file():
        return "an exported model (model.json)"
    if (folder / "modules.json").is_file():
        return "a sentence-transformers model (modules.json)"
    n = sum(1 for _ in folder.iterdir())
    return f"{n} file{'s' if n != 1 else ''} or folder{'s' if n != 1 else ''}"


def check_output(output: str | Path, overwrite: bool, option: str = "--output") -> Path:
    """The output folder of an export, refused when it holds anything (an earlier export: a
    trained model is never replaced by accident) unless ``overwrite``, or when it is no folder
    (a file, a device: :func:`~retrieval_qa.written.write_target`).

    Args:
        output: the folder given.
        overwrite: ``--overwrite`` was given: a folder that holds files is replaced whole.
        option: the option that gave it, for the error.

    Returns:
        ``output`` as a Path.

    Raises:
        InputFileError: the folder holds files and ``overwrite`` is false, naming the folder
            and the flag; or it is not a folder.
    """
    from ..written import write_target

    output = Path(output)
    target = write_target(output, option, folder=True)
    if not overwrite and target.is_dir() and any(target.iterdir()):
        raise InputFileError(option, output, f"holds {_holds(target)}; exporting would "
                             "replace it", f"pass --overwrite to replace it, or give another "
                             f"{option} folder")
    return output


def run(args) -> dict:
    """``rqa export``: the experiment's model before training, or a checkpoint converted
    to sentence-transformers; what was written.

    Args:
        args: the parsed options.
    """
    from ..runtime import apply_threads
    from ..written import atomic_dir

    if args.st_modules != "auto" and args.format != "sentence-transformers":
        raise ConflictingOptionsError(f"--st-modules {args.st_modules} chooses the modules of a "
                                      "sentence-transformers folder (fix: add --format "
                                      "sentence-transformers, or drop --st-modules)")
    if args.checkpoint:  # convert an exported model (rqa train's `checkpoint`)
        if not Path(args.checkpoint).is_dir():
            raise InputFileError("--checkpoint", args.checkpoint, "is not a folder",
                                 "pass the `checkpoint` folder printed by `rqa train`")
        if args.format != "sentence-transformers":
            raise ConflictingOptionsError("--checkpoint converts an exported model to another "
                                          "format (fix: add --format sentence-transformers)")
        if args.overrides:
            raise ConflictingOptionsError(f"--checkpoint takes no experiment settings, got "
                                          f"{args.overrides} (fix: drop them, or drop "
                                          "--checkpoint to export the experiment before "
                                          "training)")
        check_output(args.output, args.overwrite)
        from ..export.sentence_transformers import export_sentence_transformers

        apply_threads(args.threads)
        return export_sentence_transformers(args.checkpoint, args.output,
                                            modules=args.st_modules)
    from ..config import compose

    cfg = compose(overrides(args))  # checked before Lightning is imported
    check_output(args.output, args.overwrite)
    from ..training.run import export_untrained

    apply_threads(cfg.threads)
    if args.format == "rqa":
        with atomic_dir(args.output, "--output") as tmp:  # whole or not at all
            exported = export_untrained(cfg, tmp)
        return {**exported, "checkpoint": str(args.output)}
    import tempfile

    from ..export.sentence_transformers import export_sentence_transformers

    with tempfile.TemporaryDirectory(prefix="rqa-export-") as tmp:  # untrained, then converted
        untrained = export_untrained(cfg, tmp)
        converted = export_sentence_transformers(untrained.pop("checkpoint"), args.output,
                                                 modules=args.st_modules)
    return {**untrained, **converted, "checkpoint": None}
