"""The ``rqa`` parser and dispatch: the commands' parsers gathered, one command run, its
result written, and the errors turned into one line on stderr and an exit status.

Contract of every command: one JSON object on the last line of stdout (``rqa train --cfg``:
the YAML), progress and logs on stderr; bad input (an option, a config override, a file) one
line on stderr naming it and the fix, exit status 2, and so are a non-finite training loss and
a fault of the machine (a full disk, an unwritable folder: the path and the fix); a run stopped
by SIGTERM/SIGINT its JSON with the checkpoint to resume from, exit status 128+N, and any other
command stopped by them one line, exit status 128+N, its partial files removed."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator, Sequence

from ..errors import (
    NonFiniteLossError,
    RunInterrupted,
    Stopped,
    UsageError,
    machine_fault,
)
from . import (
    analyze,
    compare,
    data,
    encode,
    evaluate,
    export,
    ledger,
    metrics,
    mine,
    prepare,
    results,
    sweep,
    train,
)
from .parsing import ArgumentParser, HelpFormatter

#: the commands in the order ``rqa --help`` lists them
COMMANDS = (data, evaluate, prepare, train, sweep, export, encode, metrics, mine, compare, analyze,
            ledger, results)

DESCRIPTION = """\
rqa: train, evaluate and analyse sentence-retrieval models on ReQA and MultiReQA.

Every command prints one JSON object on the last line of stdout (progress and logs go to
stderr; --quiet for no progress). Bad input ends with one line on stderr naming the option,
key, file or record and the fix, and exit status 2. `rqa COMMAND --help` shows each command's
options, defaults and examples."""


def _epilog() -> str:
    """The examples, and every way in with the names it takes (read from conf/ when the help
    is shown)."""
    import textwrap

    from ..config import conf_names

    def names(group: str) -> str:
        return textwrap.fill(", ".join(conf_names(group)), 96, initial_indent=" " * 17,
                             subsequent_indent=" " * 17)

    return f"""\
examples:
  rqa data stats --dataset reqa_squad --pool dev
  rqa evaluate --model bm25 --dataset reqa_squad --pool dev
  rqa train experiment=dual_gru profile=cpu
  rqa evaluate --checkpoint runs/dual_gru/cpu-seed42/model
  rqa evaluate --pipeline hybrid_convex --dataset reqa_squad --pool dev

ways in:
  a method       rqa train experiment=NAME [profile=paper|cpu|gpu]   (default paper; rqa train
                 --help lists the experiments and their profiles)
  a baseline     rqa evaluate --model bm25|static:glove50|...   (rqa evaluate --help)
  an export      rqa evaluate --checkpoint DIR, rqa encode, rqa export
  a pipeline     rqa evaluate --pipeline NAME, one of conf/pipeline/:
{names("pipeline")}
  a sweep        rqa sweep NAME, one of conf/sweeps/:
{names("sweeps")}
  mining         rqa mine
  tests, tables  rqa compare, rqa metrics, rqa analyze ANALYSIS
  the record     rqa ledger (test-pool looks), rqa results (tables from the records)"""


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="rqa", description=DESCRIPTION, epilog=_epilog,
                            formatter_class=HelpFormatter)
    parser.add_argument("--threads", default=None,
                        help="torch threads for this command: N or auto (default: "
                             "$RQA_THREADS, else `threads` in conf/train.yaml: auto, half the "
                             "cores; see results/BENCH.md)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def emit(obj: dict, stream=None) -> None:
    """The command's JSON, its paths named without the machine's layout (portable_paths).

    Args:
        obj: the command's result.
        stream: where to write it; None: ``sys.stdout``.
    """
    from ..portable_paths import portable

    stream = stream or sys.stdout
    stream.write(json.dumps(portable(obj), ensure_ascii=False) + "\n")
    stream.flush()


def main(argv: Sequence[str] | None = None, stdout=None) -> int:
    """Run one command. Anything the command (or a library: Lightning, Rich, wandb) writes to
    ``sys.stdout`` goes to stderr; the JSON result is written last, to ``stdout`` (default: the
    real stdout). A run stopped by SIGTERM/SIGINT prints its JSON (with the checkpoint to
    resume from) and exits 128+N. Bad input (:class:`~retrieval_qa.errors.UsageError`, and
    the errors the readers raise naming the file, record or key) is one line on stderr and
    exit status 2.

    Args:
        argv: the arguments (without ``rqa``); None: ``sys.argv[1:]``.
        stdout: where the JSON goes; None: ``sys.stdout``.
    """
    return dispatch(build_parser().parse_args(argv), stdout or sys.stdout)


@contextlib.contextmanager
def stopping_on_signals() -> Iterator[None]:
    """SIGINT (Ctrl-C) and SIGTERM raise :class:`~retrieval_qa.errors.Stopped` in this process
    while the block runs (a training run replaces them with its own, which save a checkpoint),
    so the writes in progress remove their temporary files and ``rqa`` exits 128+N with one
    line; the handlers before are restored after. A child forked meanwhile (a data loader's
    worker) keeps the default behaviour. Off the main thread nothing changes."""
    pid = os.getpid()

    def handler(signum, frame):
        if os.getpid() != pid:  # a forked child: what it would have done
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Stopped(signum)

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError):  # not the main thread
            previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)


def _line(message: object) -> str:
    """A message as one line."""
    return " ".join(str(message).split("\n"))


#: the outputs checked before a command runs, so a target a write would destroy (a device such
#: as /dev/null, a FIFO, a folder where a file goes, a file where a folder goes) is refused at
#: once, by its option (:func:`~retrieval_qa.written.write_target`): (command, attribute,
#: option, a folder)
OUTPUTS = (("evaluate", "run_file", "--run-file", False), ("encode", "output", "--output", False),
           ("compare", "output", "--output", False), ("export", "output", "--output", True),
           ("mine", "output", "--output", True), ("sweep", "output_dir", "--output-dir", True),
           ("analyze", "output_dir", "--output-dir", True))


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse the command's output paths that a write would destroy (:data:`OUTPUTS`).

    Args:
        args: the parsed command line.
    """
    from ..written import write_target

    if getattr(args, "result", None):
        write_target(args.result, "--result")
    for command, attribute, option, folder in OUTPUTS:
        value = getattr(args, attribute, None)
        if args.command == command and isinstance(value, str) and value:
            write_target(value, option, folder=folder)


def dispatch(args: argparse.Namespace, out) -> int:
    """Run the parsed command (its ``func``) and write its result to ``out``: a dict as
    JSON (its ``exit_code``, when it has one, is the exit status), a string as it is.

    What ends a command early is one line on stderr, no traceback: bad input, a non-finite
    training loss and a fault of the machine (a full disk, a read-only or unwritable folder, a
    file where a folder goes: the path and the fix) exit with status 2; SIGINT (Ctrl-C) and
    SIGTERM with 128+N (130, 143; a training run first saves its checkpoint and prints its
    JSON).

    Args:
        args: the parsed options (their ``func`` and ``threads_rule`` set by the command).
        out: the stream the result goes to.
    """
    try:
        from ..progress import quiet_libraries

        with contextlib.redirect_stdout(sys.stderr), stopping_on_signals(), \
                quiet_libraries(getattr(args, "quiet", False)):
            from ..runtime import apply_threads, resolve_threads

            # no torch for what runs nothing (--cfg, --dry-run): the value is only checked
            if args.threads_rule == "check" or getattr(args, "cfg", False) \
                    or getattr(args, "dry_run", False):
                resolve_threads(args.threads)
            elif args.threads_rule == "apply":  # "config": the command applies its config's
                apply_threads(args.threads)
            check_outputs(args)
            result = args.func(args)
    except RunInterrupted as e:
        print(f"rqa: {e}", file=sys.stderr)
        emit({"interrupted": True, "signal": e.signum, "checkpoint": e.checkpoint,
              "global_step": e.global_step, "resume": "run the same command again"}, out)
        return e.exit_code
    except Stopped as e:
        print(f"rqa: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:  # raised by other means than the signal (a library's own)
        print(f"rqa: {Stopped(signal.SIGINT)}", file=sys.stderr)
        return 128 + signal.SIGINT
    except (UsageError, FileNotFoundError, ValueError, KeyError, ImportError) as e:
        # UsageError: bad input named by this package; the others are what the readers and
        # builders raise with a message naming the file, record or key (a KeyError's message
        # is its argument, not its repr); one line whatever the message holds
        message = e.args[0] if isinstance(e, KeyError) and len(e.args) == 1 else e
        print("rqa: error: " + _line(message), file=sys.stderr)
        return 2
    except NonFiniteLossError as e:  # its message names the step and what to try
        print("rqa: error: " + _line(e), file=sys.stderr)
        return 2
    except OSError as e:
        line = machine_fault(e)  # a full disk, an unwritable folder: the path and the fix
        if line is None:
            raise
        print("rqa: error: " + _line(line), file=sys.stderr)
        return 2
    if isinstance(result, str):  # `rqa train --cfg`, `rqa evaluate --pipeline --cfg`: YAML
        out.write(result)
        out.flush()
        return 0
    if result.get("global_rank", 0) == 0:  # a DDP worker's result stays off stdout
        emit(result, out)
        if getattr(args, "result", None):
            keep_result(result, args.result)
    return int(result.get("exit_code", 0))


def keep_result(result: dict, path: str) -> None:
    """``--result FILE``: the JSON result written to FILE too, atomically.

    Args:
        result: the command's result.
        path: the file.
    """
    from ..portable_paths import portable
    from ..written import write_text

    write_text(path, json.dumps(portable(result), ensure_ascii=False, indent=1) + "\n",
               "--result")


def run() -> int:
    """The console entry point: the arguments parsed first (``--help`` goes to stdout, so it
    pipes), then :func:`main`'s work with file descriptor 1 pointed at stderr for the whole
    process, so C extensions and exit handlers (wandb's) cannot write after the JSON; the
    JSON goes to a duplicate of the original stdout."""
    args = build_parser().parse_args()
    sys.stdout.flush()
    real = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    try:
        return dispatch(args, real)
    finally:
        real.close()
