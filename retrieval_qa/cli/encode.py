"""``rqa encode``: texts (one per line) to vectors with an exported model."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputFileError
from .files import input_file
from .parsing import add_command

EXAMPLES = """\
example:
  rqa encode --checkpoint runs/dual_gru/cpu-seed42/model --input questions.txt --output q.pt
  (questions.txt: one text per line, no blank lines; row i of q.pt is line i)"""


def add_parser(sub) -> None:
    """``rqa encode``'s parser.

    Args:
        sub: the subparsers of ``rqa``.
    """
    en = add_command(sub, "encode", run=run, epilog=EXAMPLES,
                     help="texts (one per line) to vectors with an exported model",
                     description="Encode texts (one per line) with an exported model; writes a "
                                 "[N, D] tensor whose row i is line i.")
    en.add_argument("--checkpoint", required=True, metavar="DIR",
                    help="an exported model folder (the `checkpoint` of rqa train, or the "
                         "--output of rqa export)")
    en.add_argument("--work-dir", default=None,
                    help="keep finished encoding shards here (resume after a crash)")
    en.add_argument("--input", required=True, metavar="FILE",
                    help="UTF-8 text file, one text per line, no blank lines")
    en.add_argument("--side", choices=["question", "answer"], default="question",
                    help="the tower to encode with: question or answer (candidate sentence)")
    en.add_argument("--output", required=True, help="a .pt file holding a [N, D] tensor")


def read_lines(option: str, path: str) -> list[str]:
    """The lines of a UTF-8 text file: one text per line, none blank, at least one.

    Args:
        option: the option that gave ``path`` (named in the error).
        path: the text file.
    """
    try:
        with open(input_file(option, path), encoding="utf-8") as f:
            texts = [line.rstrip("\r\n") for line in f]
    except UnicodeDecodeError as e:
        raise InputFileError(option, path, f"not UTF-8 text (byte {e.start}: {e.reason})",
                             "give a text file, one text per line, saved as UTF-8") from None
    if not texts:
        raise InputFileError(option, path, "is empty", "give one text per line")
    blank = [i for i, t in enumerate(texts, 1) if not t.strip()]
    if blank:  # row i of the output is line i of the input: nothing may be dropped
        raise InputFileError(option, path, f"line {blank[0]} is blank ({len(blank)} blank line"
                             f"{'s' if len(blank) > 1 else ''} in all)",
                             "row i of the output is line i of the input, so remove or fill "
                             "the blank lines")
    return texts


def run(args) -> dict:
    """``rqa encode``: the texts' vectors saved as one ``[N, D]`` tensor; a summary.

    Args:
        args: the parsed options.
    """
    texts = read_lines("--input", args.input)
    output = Path(args.output)
    if output.is_dir():
        raise InputFileError("--output", args.output, "is a folder",
                             "give the path of the .pt file to write")
    import torch

    from ..models.artifact import load_artifact
    from ..written import atomic_path

    model = load_artifact(args.checkpoint)
    if args.work_dir:
        model.work_dir = Path(args.work_dir)
    fn = model.encode_questions if args.side == "question" else model.encode_answers
    vectors = fn(texts, progress=not args.quiet)
    with atomic_path(output) as tmp:
        torch.save(vectors, tmp)
    return {"checkpoint": args.checkpoint, "side": args.side, "texts": len(texts),
            "dim": int(vectors.shape[1]), "output": args.output}
