"""The ``rqa`` command line. Every command prints one JSON object on the last line of stdout;
progress and logs go to stderr. Bad input (an option, a config override, a file) ends with
one line on stderr naming it and the fix, and exit status 2.

Heavy libraries (torch, Lightning, transformers) are imported by the command that needs them,
so ``rqa --help`` and an argument error answer at once."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .errors import ConflictingOptionsError, InputFileError, RunInterrupted, UsageError

DESCRIPTION = """\
rqa: train, evaluate and analyse sentence-retrieval models on ReQA and MultiReQA.

Every command prints one JSON object on the last line of stdout (progress and logs go to
stderr). Bad input ends with one line on stderr naming the option, key, file or record and
the fix, and exit status 2. `rqa COMMAND --help` shows each command's options, defaults and
examples."""

EXAMPLES = {
    "rqa": """\
examples:
  rqa data stats --dataset reqa_squad --pool dev
  rqa evaluate --model bm25 --dataset reqa_squad --pool dev
  rqa train experiment=dual_gru profile=cpu
  rqa evaluate --checkpoint runs/dual_gru/cpu-seed42/model""",
    "data": """\
example:
  rqa data stats --dataset multireqa_squad --pool test""",
    "data stats": """\
examples:
  rqa data stats --dataset reqa_squad --pool dev
  rqa data stats --dataset multireqa_squad --pool test --lenient   # skip malformed records""",
    "evaluate": """\
examples:
  rqa evaluate --model bm25 --dataset reqa_squad --pool dev
  rqa evaluate --model bm25 k1=0.9 b=0.4 --run-file runs/bm25-dev.jsonl   # conf/model/bm25.yaml
  rqa evaluate --checkpoint runs/dual_gru/cpu-seed42/model --dataset reqa_squad --pool dev
  rqa evaluate --model static:glove50 --idf --dataset squad_paragraphs
  rqa evaluate --pipeline hybrid_convex --dataset reqa_squad --pool dev   # conf/pipeline/
  rqa evaluate --pipeline hybrid_rrf --from-run-files runs/pipeline/hybrid_convex""",
    "encode": """\
example:
  rqa encode --checkpoint runs/dual_gru/cpu-seed42/model --input questions.txt --output q.pt
  (questions.txt: one text per line, no blank lines; row i of q.pt is line i)""",
    "metrics": """\
example:
  rqa evaluate --model bm25 --run-file runs/bm25-dev.jsonl
  rqa metrics --run-file runs/bm25-dev.jsonl""",
    "sweep": """\
examples:
  rqa sweep endx_confounds --dry-run          # list the runs of conf/sweeps/endx_confounds.yaml
  rqa sweep conf/sweeps/vaes.yaml --count 2   # run two of the runs not finished yet""",
    "export": """\
examples:
  rqa export --output runs/untrained-gru experiment=dual_gru profile=cpu   # untrained baseline
  rqa export --output runs/off_the_shelf experiment=dual_bert profile=cpu  # off-the-shelf MiniLM
  rqa export --checkpoint runs/dual_bert/cpu-seed42/model --format sentence-transformers \\
      --output runs/st""",
    "compare": """\
examples:
  rqa compare results/compare/bm25.questions.jsonl.gz \\
      results/compare/bm25_context.questions.jsonl.gz
  rqa compare Dual=runs/dual_gru/cpu-seed1 Dual=runs/dual_gru/cpu-seed2 \\
      ENDX=runs/endx_gru/cpu-seed1 ENDX=runs/endx_gru/cpu-seed2   # seeds averaged
  rqa compare runs/sweeps/endx_confounds --pairs all""",
    "mine": """\
example:
  rqa mine --classifier runs/mining_classifier/cpu-seed42/model \\
      --retriever runs/mining_dual/cpu-seed42/model --output runs/mined""",
}


def _emit(obj: dict, stream=None) -> None:
    """The command's JSON, its paths named without the machine's layout (portable_paths)."""
    from .portable_paths import portable

    stream = stream or sys.stdout
    stream.write(json.dumps(portable(obj), ensure_ascii=False) + "\n")
    stream.flush()


def _add_data_args(p: argparse.ArgumentParser) -> None:
    from .data.registry import DATASETS

    p.add_argument("--dataset", default="reqa_squad",
                   choices=(*DATASETS, "squad_paragraphs"),  # issue 12: paragraph task
                   metavar="NAME",
                   help="the data: reqa_squad (ReQA SQuAD), a MultiReQA set "
                        f"({', '.join(d for d in DATASETS if d != 'reqa_squad')}), or "
                        "squad_paragraphs (paragraph retrieval, with --model static:*)")
    p.add_argument("--pool", default=None,
                   help="evaluation pool: dev|train for reqa_*, test|train for multireqa_* "
                        "(default: dev / test)")
    p.add_argument("--data-dir", default=None,
                   help="folder with squad/, mrqa/, multireqa/ (else $RQA_DATA_DIR, else "
                        "../shared/data beside the repository)")
    p.add_argument("--lenient", action="store_true",
                   help="skip malformed records (reported in the output) instead of failing")
    p.add_argument("--no-cache", action="store_true", help="rebuild, do not read or write cache")


def _load(args) -> tuple:
    """The pool of ``--dataset`` / ``--pool``, with one progress line on stderr."""
    from .data import default_pool, load_pool
    from .progress import stage

    with stage(f"pool {args.dataset}/{args.pool or default_pool(args.dataset)}",
               enabled=not getattr(args, "quiet", False)) as s:
        pool, notes = load_pool(args.dataset, args.pool, args.data_dir,
                                strict=not args.lenient, use_cache=not args.no_cache)
        s.done = ("read from the cache" if "cache" in notes
                  else "built" + ("" if args.no_cache else " and cached"))
        s.detail = f"{len(pool.questions)} questions, {len(pool.candidates)} candidates"
    return pool, notes


def _unit_counts(notes: dict) -> dict:
    """MultiReQA: how many question ids the source has and how many of them have no gold
    sentence (left out of the pool, counted here so nothing is dropped silently)."""
    return {k: notes[k] for k in ("question_ids", "questions_with_gold",
                                  "questions_without_gold") if k in notes}


def cmd_data_stats(args) -> dict:
    from .data.stats import pool_stats

    pool, notes = _load(args)
    return {**pool_stats(pool), **_unit_counts(notes), "build_notes": notes}


def _check_evaluate_options(args) -> None:
    """Options of ``rqa evaluate`` that do not combine are an error, never silently ignored."""
    from .embeddings.evaluate import wants_embeddings

    if args.checkpoint and args.model:
        raise ConflictingOptionsError(
            f"--model {args.model} and --checkpoint {args.checkpoint} do not combine: "
            "--checkpoint evaluates an exported model, --model a baseline or frozen embeddings "
            "(fix: give one of them)")
    if args.overrides and (args.checkpoint or wants_embeddings(args)):
        raise ConflictingOptionsError(
            f"settings {args.overrides} are conf/model/bm25.yaml keys, for --model bm25 only "
            "(fix: drop them, or evaluate --model bm25)")
    if args.work_dir and not args.checkpoint:
        raise ConflictingOptionsError("--work-dir keeps the encoding shards of --checkpoint "
                                      "(fix: give --checkpoint, or drop --work-dir)")
    if args.cuda_graphs and not args.checkpoint:
        raise ConflictingOptionsError("--cuda-graphs encodes the model of --checkpoint "
                                      "(fix: give --checkpoint, or drop --cuda-graphs)")
    embedding_only = [f"--{name.replace('_', '-')}" for name in
                      ("idf", "layer_weights", "refiner", "pr_curve") if getattr(args, name)]
    if embedding_only and not wants_embeddings(args):
        raise ConflictingOptionsError(
            f"{', '.join(embedding_only)}: options of frozen embeddings (--model static:* or "
            "contextual:*), not of --model bm25 or --checkpoint (fix: drop them)")
    if args.run_file and Path(args.run_file).is_dir():
        raise InputFileError("--run-file", args.run_file, "is a folder",
                             "give the path of the .jsonl file to write")


def cmd_evaluate(args) -> dict:
    from .config import apply_overrides, load_yaml
    from .embeddings.evaluate import cmd_evaluate_embeddings, wants_embeddings  # issue 12

    # every --pipeline option leads there, so one given without --pipeline is an error there
    if args.pipeline or args.from_run_files or args.pipeline_dir or args.max_questions \
            or args.cfg:
        from .pipeline.cli import cmd_evaluate_pipeline

        return cmd_evaluate_pipeline(args, eval_cfg=load_yaml("eval/default.yaml"), load=_load)
    _check_evaluate_options(args)
    if not args.checkpoint and not args.model:
        args.model = "bm25"
    eval_cfg = load_yaml("eval/default.yaml")
    if wants_embeddings(args):
        return cmd_evaluate_embeddings(args, eval_cfg)
    if args.checkpoint:
        from .models.artifact import load_artifact

        model = load_artifact(args.checkpoint)  # before the pool: a wrong folder fails at once
    else:  # the settings are checked before any data is read
        bm25_cfg = apply_overrides(load_yaml("model/bm25.yaml"), args.overrides)
    pool, notes = _load(args)
    if args.min_questions_per_answer:
        from .data.subsets import one_to_many_subset

        pool = one_to_many_subset(pool, args.min_questions_per_answer)
    start = time.perf_counter()
    if args.checkpoint:
        from .evaluation.dense import evaluate_model

        if args.work_dir:
            model.work_dir = Path(args.work_dir)
        if args.cuda_graphs:
            model.cuda_graphs = True
        sizes = eval_cfg.encode_batch_size
        device = getattr(getattr(model, "device", None), "type", "cpu")
        result = evaluate_model(model, pool, batch_size=sizes.get(device, sizes.cpu),
                                top_k=eval_cfg.top_k, memory_mb=eval_cfg.memory_mb,
                                ks=tuple(eval_cfg.ks), doc_level=eval_cfg.doc_level,
                                run_file=args.run_file, progress=not args.quiet)
        return {**result.summary(), **_sse(args, pool, result.extra["question_embeddings"]),
                "dataset": pool.dataset, "pool": pool.pool,
                "model": args.checkpoint, "settings": model.meta,
                "encode_seconds": result.extra["encode_seconds"],
                "seconds": round(time.perf_counter() - start, 3), **_unit_counts(notes),
                "skipped_records": notes.get("skipped_records")}
    from .baselines.bm25 import BM25Scorer, BM25Settings
    from .evaluation.evaluator import evaluate

    settings = BM25Settings.from_config(bm25_cfg)
    scorer = BM25Scorer(pool, settings, progress=not args.quiet)
    index_seconds = time.perf_counter() - start
    result = evaluate(pool, scorer, top_k=eval_cfg.top_k, memory_mb=eval_cfg.memory_mb,
                      ks=tuple(eval_cfg.ks), doc_level=eval_cfg.doc_level,
                      run_file=args.run_file, progress=not args.quiet, desc="BM25 retrieval")
    no_sse = {"sse": None, "sse_note": f"{args.model} has no question embeddings"} \
        if args.min_questions_per_answer else {}
    return {**result.summary(), **no_sse, "dataset": pool.dataset, "pool": pool.pool,
            "model": args.model, "settings": settings.to_dict(),
            "index_seconds": round(index_seconds, 3),
            "seconds": round(time.perf_counter() - start, 3), **_unit_counts(notes),
            "skipped_records": notes.get("skipped_records")}


def _sse(args, pool, question_embeddings) -> dict:
    """With --min-questions-per-answer N: the SSE of Cross-VAEs Table 3 over the questions of
    the answers with at least N questions (mean squared distance of l2-normalised question
    embeddings over the pairs of questions sharing an answer; retrieval_qa/evaluation/sse.py)."""
    if not args.min_questions_per_answer:
        return {}
    from .evaluation.sse import pool_sse

    stats = pool_sse(question_embeddings, pool, max(args.min_questions_per_answer, 2))
    return {"sse": None if stats.answers == 0 else round(stats.value, 4),
            "sse_pairs": stats.pairs, "sse_answers": stats.answers,
            "sse_definition": "mean over question pairs sharing an answer of "
                              "||q_i/|q_i| - q_j/|q_j|||^2"}


def _with_threads(args) -> list[str]:
    """`rqa --threads N train ...` is `threads=N` unless the overrides say otherwise."""
    overrides = list(args.overrides)
    if args.threads and not any(o.startswith("threads=") for o in overrides):
        overrides.append(f"threads={args.threads}")
    return overrides


def cmd_train(args) -> dict:
    from .training.compose import compose_traced

    composed = compose_traced(_with_threads(args))  # checked before Lightning is imported
    if args.cfg:  # what would run, each value with its source; nothing trained
        from .training.provenance import annotated_yaml

        return {"text": annotated_yaml(composed.cfg, composed.sources())}
    from .training.run import train

    return train(composed)


def cmd_sweep(args) -> dict:
    from .sweeps.run import run_sweep

    return run_sweep(args.file, count=args.count, dry_run=args.dry_run,
                     output_dir=args.output_dir, method=args.method, seed=args.seed,
                     threads=args.threads, in_process=args.in_process, only=args.runs)


def cmd_export(args) -> dict:
    from .runtime import apply_threads

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
        from .export.sentence_transformers import export_sentence_transformers

        apply_threads(args.threads)
        return export_sentence_transformers(args.checkpoint, args.output,
                                            modules=args.st_modules)
    from .training.compose import compose

    cfg = compose(_with_threads(args))  # checked before Lightning is imported
    from .training.run import export_untrained

    apply_threads(cfg.threads)
    if args.format == "rqa":
        return export_untrained(cfg, args.output)
    import tempfile

    from .export.sentence_transformers import export_sentence_transformers

    with tempfile.TemporaryDirectory(prefix="rqa-export-") as tmp:  # untrained, then converted
        untrained = export_untrained(cfg, tmp)
        converted = export_sentence_transformers(untrained.pop("checkpoint"), args.output,
                                                 modules=args.st_modules)
    return {**untrained, **converted, "checkpoint": None}


def _input_file(option: str, path: str) -> Path:
    """``path`` given with ``option``, checked to be an existing file."""
    p = Path(path)
    if not p.exists():
        raise InputFileError(option, path, "does not exist", "check the path")
    if not p.is_file():
        raise InputFileError(option, path, "is a folder, not a file", "give the file's path")
    return p


def _read_lines(option: str, path: str) -> list[str]:
    """The lines of a UTF-8 text file: one text per line, none blank, at least one."""
    try:
        with open(_input_file(option, path), encoding="utf-8") as f:
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


def cmd_encode(args) -> dict:
    texts = _read_lines("--input", args.input)
    output = Path(args.output)
    if output.is_dir():
        raise InputFileError("--output", args.output, "is a folder",
                             "give the path of the .pt file to write")
    import torch

    from .models.artifact import load_artifact
    from .written import atomic_path

    model = load_artifact(args.checkpoint)
    if args.work_dir:
        model.work_dir = Path(args.work_dir)
    fn = model.encode_questions if args.side == "question" else model.encode_answers
    vectors = fn(texts, progress=not args.quiet)
    with atomic_path(output) as tmp:
        torch.save(vectors, tmp)
    return {"checkpoint": args.checkpoint, "side": args.side, "texts": len(texts),
            "dim": int(vectors.shape[1]), "output": args.output}


def cmd_metrics(args) -> dict:
    from .evaluation.runfile import metrics_from_run_file, read_run_file

    _input_file("--run-file", args.run_file)
    first = next(iter(read_run_file(args.run_file)), {})
    metrics = metrics_from_run_file(args.run_file, ks=tuple(args.ks))
    return {"run_file": args.run_file, "question_unit": first.get("question_unit", "unknown"),
            "metrics": {k: round(v, 4) for k, v in metrics.items()}}  # as evaluate rounds


def cmd_compare(args) -> dict:
    from .analysis.compare import run_compare

    return run_compare(args.inputs, metrics=args.metrics, pairs=args.pairs, output=args.output,
                       samples=args.samples, permutations=args.permutations, seed=args.seed)


def cmd_analyze(args) -> dict:
    from .analysis.cli import run_analysis

    return run_analysis(args)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line: the problem and where the help is (the
    usage is in ``--help``), exit status 2 as argparse's. An epilog may be a function, called
    when the help is shown (``rqa train``'s list of experiments reads conf/)."""

    def format_help(self) -> str:
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (fix: see `{self.prog} --help`)\n")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions wrapped to the terminal, examples (paragraphs with indented lines) as
    written; each option's default appended to its help ("(default: ...)") unless the help
    already says it, or there is none to show (None, a flag's False, an empty list)."""

    def _fill_text(self, text, width, indent):
        import textwrap

        paragraphs = text.split("\n\n")
        return "\n\n".join(
            p if any(line.startswith(" ") for line in p.splitlines())
            else textwrap.fill(" ".join(p.split()), width, initial_indent=indent,
                               subsequent_indent=indent)
            for p in paragraphs)

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if ("default" in text.lower() or action.required or default is argparse.SUPPRESS
                or default is None or default is False or default == []):
            return text
        return f"{text} (default: %(default)s)"


def add_parser(sub, name: str, example_key: str | None = None, **kwargs) -> argparse.ArgumentParser:
    """A subcommand with this module's help layout and its examples (EXAMPLES[example_key])."""
    epilog = EXAMPLES.get(example_key or name)
    return sub.add_parser(name, formatter_class=HelpFormatter, epilog=epilog, **kwargs)


def _train_epilog() -> str:
    from .training.compose import experiment_profiles

    profiles = experiment_profiles()
    width = max(map(len, profiles)) if profiles else 0
    rows = "\n".join(f"  {name:<{width}}  {', '.join(p)}" for name, p in profiles.items())
    return f"""\
examples:
  rqa train experiment=dual_gru profile=cpu          # minutes on a laptop CPU
  rqa train experiment=endx_gru profile=cpu trainer.max_steps=200 output_dir=runs/smoke
                                                     # a short run, in a folder of its own
  rqa train experiment=dual_bert                     # the paper's settings (profile=paper)

experiments (conf/experiment/) and their profiles:
{rows}

Settings are key=value over the composed config (conf/train.yaml and its groups): a key
that does not exist, or a value of another type than the key's default, is an error before
anything runs. A run writes runs/<experiment>/<profile>-seed<seed>/ (the folder does not
depend on the other settings) and, run again with the same settings, resumes from its last
checkpoint, or reuses its result when finished ("reused" on stderr). A folder holding a run
of other settings is refused before anything is written, naming the settings that differ:
output_dir=DIR gives the run a folder of its own, resume=never starts that folder over."""


def _nonnegative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return value


def _run_numbers(text: str) -> list[int]:
    try:
        return [int(i) for i in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated run numbers, "
                                         "e.g. 1,3") from None


def _ks(text: str) -> list[int]:
    try:
        ks = [int(k) for k in text.split(",")]
    except ValueError:
        ks = []
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated ranks >= 1, "
                                         "e.g. 1,5,10")
    return ks


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="rqa", description=DESCRIPTION,
                                     epilog=EXAMPLES["rqa"], formatter_class=HelpFormatter)
    parser.add_argument("--threads", default=None,
                        help="torch threads for this command: N or auto (default: "
                             "$RQA_THREADS, else `threads` in conf/train.yaml: auto, half the "
                             "cores; see results/BENCH.md)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    data = add_parser(sub, "data", help="dataset utilities: counts of a pool",
                      description="Dataset utilities.").add_subparsers(
        dest="data_command", required=True, metavar="SUBCOMMAND")
    stats = add_parser(data, "stats", "data stats",
                       help="counts of a pool (ENDX Table 1 layout)",
                       description="Counts of a pool: questions, candidate sentences, QA "
                                   "inputs, answers per question (ENDX Table 1 layout).")
    _add_data_args(stats)
    stats.set_defaults(func=cmd_data_stats)

    ev = add_parser(sub, "evaluate", help="evaluate a model on a pool (BM25, an exported "
                                          "model, frozen embeddings)",
                    description="Evaluate a model on a pool with the shared evaluator: "
                                "MRR, R@k, P@k (and their paragraph-level doc_ versions), "
                                "settings in conf/eval/default.yaml.")
    from .embeddings.evaluate import EMBEDDING_MODELS, add_embedding_args  # issue 12

    ev.add_argument("--model", default=None, choices=["bm25", *EMBEDDING_MODELS],
                    help="the model without training: bm25 (conf/model/bm25.yaml, its keys "
                         "as key=value), or frozen embeddings static:* / contextual:*; "
                         "default: bm25 unless --checkpoint is given")
    add_embedding_args(ev)
    ev.add_argument("--checkpoint", default=None, metavar="DIR",
                    help="evaluate this exported model folder instead (the `checkpoint` "
                         "printed by rqa train, or the --output of rqa export)")
    _add_data_args(ev)
    ev.add_argument("--run-file", default=None, metavar="FILE",
                    help="write one JSON line per question here (its gold rank and top "
                         "candidates; rqa metrics recomputes the metrics from it)")
    ev.add_argument("--min-questions-per-answer", type=_nonnegative_int, default=0, metavar="K",
                    help="evaluate on the one-to-many subset (answers with >= K questions; "
                         "default 0: the whole pool)")
    ev.add_argument("--quiet", action="store_true", help="no progress on stderr")
    ev.add_argument("--work-dir", default=None,
                    help="--checkpoint: keep finished encoding shards here, so the same command "
                         "resumes after a crash without encoding them again")
    ev.add_argument("--cuda-graphs", action="store_true",
                    help="--checkpoint on a GPU: replay each batch shape as a CUDA graph "
                         "(opt-in; not yet measured on a GPU; no effect on a CPU)")
    from .pipeline.cli import add_pipeline_arguments  # issue 32

    add_pipeline_arguments(ev)
    ev.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                    help="--model bm25 settings over conf/model/bm25.yaml, e.g. k1=0.9 b=0.4; "
                         "with --pipeline, its keys, e.g. reranker.top_k=10")
    ev.set_defaults(func=cmd_evaluate)

    tr = sub.add_parser("train", help="train a method: rqa train experiment=NAME [profile=cpu]",
                        description="Train a method: compose conf/train.yaml, the experiment, "
                                    "its profile and KEY=VALUE settings; fit, export the best "
                                    "checkpoint, evaluate it on the test pool and print the "
                                    "report.",
                        formatter_class=HelpFormatter, epilog=_train_epilog)
    tr.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                    help="experiment=NAME (required), profile=paper|cpu|gpu (default paper), "
                         "then any config key, e.g. seed=2 trainer.max_steps=200")
    tr.add_argument("--cfg", action="store_true",
                    help="print the composed config without training, each value followed by "
                         "where it came from (conf/train.yaml, a group file, the experiment, "
                         "its profile, an `extends:` parent, or the command line)")
    tr.set_defaults(func=cmd_train)

    from .sweeps.plan import DEFAULT_OUTPUT_DIR as SWEEPS_DIR

    sw = add_parser(sub, "sweep", help="run a wandb sweep file here, without a wandb server: "
                                       "each run `rqa train` with wandb offline, resumable",
                    description="Run a sweep file in wandb's format here, without a wandb "
                                "server: each run is `rqa train` with wandb offline; finished "
                                "runs are kept, so the same command resumes.")
    sw.add_argument("file", help="a sweep file in wandb's format, or a name of conf/sweeps/")
    sw.add_argument("--count", type=_nonnegative_int, default=None,
                    help="grid: run at most N of the runs not finished yet; random: the "
                         "number of settings to sample (required)")
    sw.add_argument("--runs", type=_run_numbers, default=None,
                    metavar="I,J,...",
                    help="run only these run numbers (as --dry-run lists them), in this order; "
                         "the rest stay for a later call")
    sw.add_argument("--dry-run", action="store_true",
                    help="list the runs, their commands and folders; run nothing")
    sw.add_argument("--output-dir", default=SWEEPS_DIR,
                    help=f"runs go to OUTPUT_DIR/<sweep name>/<setting>/ (default {SWEEPS_DIR})")
    sw.add_argument("--method", choices=["grid", "random"], default=None,
                    help="run with this method instead of the file's (e.g. a bayes sweep's "
                         "space sampled at random)")
    sw.add_argument("--seed", type=int, default=0, help="seed of random sampling (default 0)")
    sw.add_argument("--in-process", action="store_true",
                    help="run each `rqa train` in this process (saves the start-up of a "
                         "process per run, for tiny runs; default: a subprocess per run, as "
                         "`wandb agent` runs them)")
    sw.set_defaults(func=cmd_sweep)

    ex = add_parser(sub, "export", help="export an experiment's model before training (a "
                                        "baseline), or convert an exported model "
                                        "(--checkpoint) to sentence-transformers",
                    description="Export an experiment's model as initialised, before any "
                                "training (a baseline for rqa evaluate / encode: random towers "
                                "untrained, a pretrained encoder such as the packaged MiniLM "
                                "off-the-shelf, as its authors trained it), or convert an "
                                "exported model (--checkpoint) to a sentence-transformers "
                                "folder.")
    ex.add_argument("--output", required=True, help="folder for the inference model")
    from .export import EXPORT_FORMATS, ST_MODULES

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
    ex.set_defaults(func=cmd_export)

    en = add_parser(sub, "encode", help="texts (one per line) to vectors with an exported model",
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
    en.add_argument("--quiet", action="store_true", help="no progress on stderr")
    en.set_defaults(func=cmd_encode)

    from .config import load_yaml

    met = add_parser(sub, "metrics", help="recompute metrics from a run file",
                     description="Recompute the metrics of rqa evaluate from the run file it "
                                 "wrote (--run-file), rounded as rqa evaluate rounds them.")
    met.add_argument("--run-file", required=True, metavar="FILE",
                     help="a run file written by rqa evaluate --run-file (one JSON line per "
                          "question, with its gold rank)")
    met.add_argument("--ks", type=_ks, default=list(load_yaml("eval/default.yaml").ks),
                     metavar="K,K,...",
                     help="the cut-offs of R@k / P@k (default: ks of conf/eval/default.yaml, "
                          "%(default)s)")
    met.set_defaults(func=cmd_metrics)

    from .mining.cli import add_mine_arguments, cmd_mine  # issue 13: supervised mining

    mi = add_parser(sub, "mine", help="supervised mining: retriever neighbours labelled by the "
                                      "classifier (resumes when --output exists)",
                    description="Supervised mining: the retriever's neighbours of each "
                                "question, labelled by the classifier; the pairs it accepts "
                                "are new training data. Resumes when --output exists.")
    add_mine_arguments(mi)
    mi.set_defaults(func=cmd_mine)

    co = add_parser(sub, "compare", help="paired tests between runs: MRR / R@k differences, "
                                         "bootstrap intervals, randomisation p (Holm)",
                    description="Compare settings question by question on one pool: the "
                                "MRR / R@k difference with its paired bootstrap 95% interval, "
                                "the paired randomisation (sign-flip) p-value Holm-corrected "
                                "across the pairs, wins/ties/losses, and with seeds a "
                                "seed-level test (retrieval_qa/analysis/compare.py).")
    co.add_argument("inputs", nargs="+", metavar="[NAME=]PATH",
                    help="per-question records (*.questions.jsonl.gz, per_question.jsonl.gz), "
                         "run files (*.jsonl), run folders or sweep folders; the first is the "
                         "baseline; a NAME repeated = seeds of one setting")
    co.add_argument("--pairs", choices=["first", "all"], default="first",
                    help="first: each setting vs the first; all: every pair")
    co.add_argument("--metrics", default=None, metavar="M,M,...",
                    type=lambda t: [m.strip() for m in t.split(",") if m.strip()],
                    help="mrr, r@K, doc_mrr, doc_r@K (default: mrr, the records' r@k and "
                         "doc_mrr when every input has doc ranks)")
    co.add_argument("--output", default=None, metavar="FILE.md",
                    help="write the markdown table here and its JSON beside (FILE.json)")
    co.add_argument("--samples", type=int, default=2000, help="bootstrap resamples")
    co.add_argument("--permutations", type=int, default=10000,
                    help="sign flips of the randomisation test")
    co.add_argument("--seed", type=int, default=0, help="seed of the resampling")
    co.set_defaults(func=cmd_compare)

    from .analysis.cli import ANALYZE_DESCRIPTION, add_analyze_arguments

    an = add_parser(sub, "analyze", help="analyses of trained models and finished runs: "
                                         "one-to-many, similarity, t-SNE, BERTQA, ablation "
                                         "and side-by-side tables",
                    description=ANALYZE_DESCRIPTION)
    add_analyze_arguments(an, HelpFormatter)
    an.set_defaults(func=cmd_analyze)
    return parser


def main(argv: Sequence[str] | None = None, stdout=None) -> int:
    """Run one command. Anything the command (or a library: Lightning, Rich, wandb) writes to
    ``sys.stdout`` goes to stderr; the JSON result is written last, to ``stdout`` (default: the
    real stdout). A run stopped by SIGTERM/SIGINT prints its JSON (with the checkpoint to
    resume from) and exits 128+N. Bad input (:class:`~retrieval_qa.errors.UsageError`, and
    the errors the readers raise naming the file, record or key) is one line on stderr and
    exit status 2."""
    return _run_parsed(build_parser().parse_args(argv), stdout or sys.stdout)


def _run_parsed(args: argparse.Namespace, out) -> int:
    try:
        with contextlib.redirect_stdout(sys.stderr):
            from .runtime import apply_threads, resolve_threads

            if args.func in (cmd_data_stats, cmd_compare):  # no torch: the value is checked
                resolve_threads(args.threads)
            elif args.func not in (cmd_train, cmd_export):  # they apply the config's threads
                apply_threads(args.threads)
            result = args.func(args)
    except RunInterrupted as e:
        print(f"rqa: {e}", file=sys.stderr)
        _emit({"interrupted": True, "signal": e.signum, "checkpoint": e.checkpoint,
               "global_step": e.global_step, "resume": "run the same command again"}, out)
        return e.exit_code
    except (UsageError, FileNotFoundError, ValueError, KeyError, ImportError) as e:
        # UsageError: bad input named by this package; the others are what the readers and
        # builders raise with a message naming the file, record or key (a KeyError's message
        # is its argument, not its repr); one line whatever the message holds
        message = e.args[0] if isinstance(e, KeyError) and len(e.args) == 1 else e
        print("rqa: error: " + " ".join(str(message).split("\n")), file=sys.stderr)
        return 2
    if args.func in (cmd_train, cmd_evaluate) and args.cfg:  # --cfg: the YAML, not JSON
        out.write(result["text"])
        out.flush()
    elif result.get("global_rank", 0) == 0:  # a DDP worker's result stays off stdout
        _emit(result, out)
    return int(result.get("exit_code", 0)) if args.func is cmd_sweep else 0


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
        return _run_parsed(args, real)
    finally:
        real.close()


if __name__ == "__main__":
    raise SystemExit(run())
