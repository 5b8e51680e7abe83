"""The ``rqa`` command line. Every command prints one JSON object on the last line of stdout;
progress and logs go to stderr."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .config import apply_overrides, load_yaml
from .data import DATASETS, load_pool
from .data.stats import pool_stats
from .data.subsets import one_to_many_subset


def _emit(obj: dict, stream=None) -> None:
    """The command's JSON, its paths named without the machine's layout (portable_paths)."""
    from .portable_paths import portable

    stream = stream or sys.stdout
    stream.write(json.dumps(portable(obj), ensure_ascii=False) + "\n")
    stream.flush()


def _add_data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", default="reqa_squad",
                   choices=(*DATASETS, "squad_paragraphs"))  # issue 12: paragraph task
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
    return load_pool(args.dataset, args.pool, args.data_dir, strict=not args.lenient,
                     use_cache=not args.no_cache)


def _unit_counts(notes: dict) -> dict:
    """MultiReQA: how many question ids the source has and how many of them have no gold
    sentence (left out of the pool, counted here so nothing is dropped silently)."""
    return {k: notes[k] for k in ("question_ids", "questions_with_gold",
                                  "questions_without_gold") if k in notes}


def cmd_data_stats(args) -> dict:
    pool, notes = _load(args)
    return {**pool_stats(pool), **_unit_counts(notes), "build_notes": notes}


def cmd_evaluate(args) -> dict:
    from .evaluation import evaluate

    eval_cfg = load_yaml("eval/default.yaml")
    from .embeddings.evaluate import cmd_evaluate_embeddings, wants_embeddings  # issue 12

    if wants_embeddings(args):
        return cmd_evaluate_embeddings(args, eval_cfg)
    pool, notes = _load(args)
    if args.min_questions_per_answer:
        pool = one_to_many_subset(pool, args.min_questions_per_answer)
    start = time.perf_counter()
    if args.checkpoint:
        from .evaluation.dense import evaluate_model
        from .models.artifact import load_artifact

        model = load_artifact(args.checkpoint)
        if args.work_dir:
            model.work_dir = Path(args.work_dir)
        result = evaluate_model(model, pool, top_k=eval_cfg.top_k, memory_mb=eval_cfg.memory_mb,
                                ks=tuple(eval_cfg.ks), doc_level=eval_cfg.doc_level,
                                run_file=args.run_file, progress=not args.quiet)
        return {**result.summary(), **_sse(args, pool, result.extra["question_embeddings"]),
                "dataset": pool.dataset, "pool": pool.pool,
                "model": args.checkpoint, "settings": model.meta,
                "encode_seconds": result.extra["encode_seconds"],
                "seconds": round(time.perf_counter() - start, 3), **_unit_counts(notes),
                "skipped_records": notes.get("skipped_records")}
    if args.model == "bm25":
        from .baselines.bm25 import BM25Scorer, BM25Settings

        cfg = apply_overrides(load_yaml("model/bm25.yaml"), args.overrides)
        settings = BM25Settings.from_config(cfg)
        scorer = BM25Scorer(pool, settings, progress=not args.quiet)
        model_settings = settings.to_dict()
    else:
        raise SystemExit(f"unknown model {args.model!r}")
    index_seconds = time.perf_counter() - start
    result = evaluate(pool, scorer, top_k=eval_cfg.top_k, memory_mb=eval_cfg.memory_mb,
                      ks=tuple(eval_cfg.ks), doc_level=eval_cfg.doc_level,
                      run_file=args.run_file, progress=not args.quiet)
    no_sse = {"sse": None, "sse_note": f"{args.model} has no question embeddings"} \
        if args.min_questions_per_answer else {}
    return {**result.summary(), **no_sse, "dataset": pool.dataset, "pool": pool.pool,
            "model": args.model, "settings": model_settings,
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
    from .training.compose import compose
    from .training.run import train

    return train(compose(_with_threads(args)))


def cmd_sweep(args) -> dict:
    from .training.sweep import run_sweep

    return run_sweep(args.file, count=args.count, dry_run=args.dry_run,
                     output_dir=args.output_dir, method=args.method, seed=args.seed,
                     threads=args.threads, in_process=args.in_process, only=args.runs)


def cmd_export(args) -> dict:
    from .runtime import apply_threads

    if args.checkpoint:  # convert an exported model (rqa train's `checkpoint`)
        if args.format != "sentence-transformers":
            raise ValueError("--checkpoint converts an exported model to another format: add "
                             "--format sentence-transformers")
        if args.overrides:
            raise ValueError(f"--checkpoint takes no experiment settings, got {args.overrides}")
        from .export.sentence_transformers import export_sentence_transformers

        apply_threads(args.threads)
        return export_sentence_transformers(args.checkpoint, args.output)
    from .training.compose import compose
    from .training.run import export_untrained

    cfg = compose(_with_threads(args))
    apply_threads(cfg.threads)
    if args.format == "rqa":
        return export_untrained(cfg, args.output)
    import tempfile

    from .export.sentence_transformers import export_sentence_transformers

    with tempfile.TemporaryDirectory(prefix="rqa-export-") as tmp:  # untrained, then converted
        untrained = export_untrained(cfg, tmp)
        converted = export_sentence_transformers(untrained.pop("checkpoint"), args.output)
    return {**untrained, **converted, "checkpoint": None}


def cmd_encode(args) -> dict:
    import torch

    from .models.artifact import load_artifact

    with open(args.input, encoding="utf-8") as f:
        texts = [line.rstrip("\r\n") for line in f]
    blank = [i for i, t in enumerate(texts, 1) if not t.strip()]
    if blank:  # row i of the output is line i of the input: nothing may be dropped
        raise ValueError(f"{args.input}: line {blank[0]} is blank ({len(blank)} blank line"
                         f"{'s' if len(blank) > 1 else ''} in all); row i of the output is line "
                         f"i of the input, so remove or fill the blank lines")
    model = load_artifact(args.checkpoint)
    if args.work_dir:
        model.work_dir = Path(args.work_dir)
    fn = model.encode_questions if args.side == "question" else model.encode_answers
    vectors = fn(texts, progress=not args.quiet)
    torch.save(vectors, args.output)
    return {"checkpoint": args.checkpoint, "side": args.side, "texts": len(texts),
            "dim": int(vectors.shape[1]), "output": args.output}


def cmd_metrics(args) -> dict:
    from .evaluation import metrics_from_run_file, read_run_file

    first = next(iter(read_run_file(args.run_file)), {})
    metrics = metrics_from_run_file(args.run_file)
    return {"run_file": args.run_file, "question_unit": first.get("question_unit", "unknown"),
            "metrics": {k: round(v, 4) for k, v in metrics.items()}}  # as evaluate rounds


def cmd_analyze(args) -> dict:
    from .analysis.cli import run_analysis

    return run_analysis(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rqa", description=__doc__)
    parser.add_argument("--threads", default=None,
                        help="torch threads for this command: N or auto (default: "
                             "$RQA_THREADS, else `threads` in conf/train.yaml: auto, half the "
                             "cores; see results/BENCH.md)")
    sub = parser.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="dataset utilities").add_subparsers(dest="data_command",
                                                                          required=True)
    stats = data.add_parser("stats", help="counts of a pool (ENDX Table 1 layout)")
    _add_data_args(stats)
    stats.set_defaults(func=cmd_data_stats)

    ev = sub.add_parser("evaluate", help="evaluate a model on a pool")
    from .embeddings.evaluate import EMBEDDING_MODELS, add_embedding_args  # issue 12

    ev.add_argument("--model", default="bm25", choices=["bm25", *EMBEDDING_MODELS])
    add_embedding_args(ev)
    ev.add_argument("--checkpoint", default=None,
                    help="an exported dual-encoder folder (the `checkpoint` of rqa train)")
    _add_data_args(ev)
    ev.add_argument("--run-file", default=None, help="write one JSON line per question here")
    ev.add_argument("--min-questions-per-answer", type=int, default=0,
                    help="evaluate on the one-to-many subset (answers with >= K questions)")
    ev.add_argument("--quiet", action="store_true", help="no progress bars")
    ev.add_argument("--work-dir", default=None,
                    help="keep finished encoding shards here: the same command resumes after "
                         "a crash without encoding them again")
    ev.add_argument("overrides", nargs="*", help="model config overrides, e.g. k1=0.9")
    ev.set_defaults(func=cmd_evaluate)

    tr = sub.add_parser("train", help="train a method: rqa train experiment=NAME [profile=cpu]")
    tr.add_argument("overrides", nargs="*", help="experiment=NAME, profile=..., key=value")
    tr.set_defaults(func=cmd_train)

    from .training.sweep import DEFAULT_OUTPUT_DIR as SWEEPS_DIR

    sw = sub.add_parser("sweep", help="run a wandb sweep file here, without a wandb server: "
                                      "each run `rqa train` with wandb offline, resumable")
    sw.add_argument("file", help="a sweep file in wandb's format, or a name of conf/sweeps/")
    sw.add_argument("--count", type=int, default=None,
                    help="grid: run at most N of the runs not finished yet; random: the "
                         "number of settings to sample (required)")
    sw.add_argument("--runs", type=lambda v: [int(i) for i in v.split(",")], default=None,
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


    ex = sub.add_parser("export", help="export an experiment's towers untrained (a baseline), "
                                       "or convert an exported model (--checkpoint) to "
                                       "sentence-transformers")
    ex.add_argument("--output", required=True, help="folder for the inference model")
    from .export import EXPORT_FORMATS

    ex.add_argument("--format", choices=EXPORT_FORMATS, default="rqa",
                    help="rqa: this suite's folder (rqa evaluate / encode); sentence-transformers:"
                         " a folder SentenceTransformer(path, trust_remote_code=True) loads")
    ex.add_argument("--checkpoint", default=None,
                    help="an exported model folder to convert (the `checkpoint` of rqa train); "
                         "without it the experiment's untrained model is exported")
    ex.add_argument("overrides", nargs="*", help="experiment=NAME, profile=..., key=value")
    ex.set_defaults(func=cmd_export)

    en = sub.add_parser("encode", help="texts (one per line) to vectors with an exported model")
    en.add_argument("--checkpoint", required=True)
    en.add_argument("--work-dir", default=None,
                    help="keep finished encoding shards here (resume after a crash)")
    en.add_argument("--input", required=True)
    en.add_argument("--side", choices=["question", "answer"], default="question")
    en.add_argument("--output", required=True, help="a .pt file holding a [N, D] tensor")
    en.add_argument("--quiet", action="store_true")
    en.set_defaults(func=cmd_encode)

    met = sub.add_parser("metrics", help="recompute metrics from a run file")
    met.add_argument("--run-file", required=True)
    met.set_defaults(func=cmd_metrics)

    from .mining.cli import add_mine_arguments, cmd_mine  # issue 13: supervised mining

    mi = sub.add_parser("mine", help="supervised mining: retriever neighbours labelled by the "
                                     "classifier (resumes when --output exists)")
    add_mine_arguments(mi)
    mi.set_defaults(func=cmd_mine)

    from .analysis.cli import add_analyze_arguments

    an = sub.add_parser("analyze", help="ENDX analyses: Tables 4-6, Figures 2-4")
    add_analyze_arguments(an)
    an.set_defaults(func=cmd_analyze)
    return parser


def main(argv: Sequence[str] | None = None, stdout=None) -> int:
    """Run one command. Anything the command (or a library: Lightning, Rich, wandb) writes to
    ``sys.stdout`` goes to stderr; the JSON result is written last, to ``stdout`` (default: the
    real stdout). A run stopped by SIGTERM/SIGINT prints its JSON (with the checkpoint to
    resume from) and exits 128+N."""
    from .training.callbacks import RunInterrupted

    args = build_parser().parse_args(argv)
    out = stdout or sys.stdout
    try:
        with contextlib.redirect_stdout(sys.stderr):
            if args.func not in (cmd_train, cmd_export):  # they apply the config's threads
                from .runtime import apply_threads

                apply_threads(args.threads)
            result = args.func(args)
    except RunInterrupted as e:
        print(f"rqa: {e}", file=sys.stderr)
        _emit({"interrupted": True, "signal": e.signum, "checkpoint": e.checkpoint,
               "global_step": e.global_step, "resume": "run the same command again"}, out)
        return e.exit_code
    except (FileNotFoundError, ValueError, KeyError, ImportError) as e:
        print(f"rqa: error: {e}", file=sys.stderr)
        return 2
    if result.get("global_rank", 0) == 0:  # a DDP worker's result stays off stdout
        _emit(result, out)
    return int(result.get("exit_code", 0)) if args.func is cmd_sweep else 0


def run() -> int:
    """The console entry point: :func:`main` with file descriptor 1 pointed at stderr for the
    whole process, so C extensions and exit handlers (wandb's) cannot write after the JSON;
    the JSON goes to a duplicate of the original stdout."""
    sys.stdout.flush()
    real = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    try:
        return main(stdout=real)
    finally:
        real.close()


if __name__ == "__main__":
    raise SystemExit(run())
