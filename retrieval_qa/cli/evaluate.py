"""``rqa evaluate``: a model on a pool with the shared evaluator: BM25 and an exported model
here, frozen embeddings in :mod:`.evaluate_embeddings`, a retrieval pipeline in
:mod:`.evaluate_pipeline`."""

from __future__ import annotations

import contextlib
import tempfile
import time
from pathlib import Path

from ..errors import ConflictingOptionsError, InputFileError
from . import evaluate_embeddings, evaluate_pipeline
from .parsing import add_command, nonnegative_int
from .pools import add_data_args, load, unit_counts

EXAMPLES = """\
examples:
  rqa evaluate --model bm25 --dataset reqa_squad --pool dev
  rqa evaluate --model bm25 k1=0.9 b=0.4 --run-file runs/bm25-dev.jsonl   # conf/model/bm25.yaml
  rqa evaluate --checkpoint runs/dual_gru/cpu-seed42/model --dataset reqa_squad --pool dev
  rqa evaluate --model static:glove50 --idf --dataset squad_paragraphs
  rqa evaluate --pipeline hybrid_convex --dataset reqa_squad --pool dev   # conf/pipeline/
  rqa evaluate --pipeline hybrid_rrf --from-run-files runs/pipeline/hybrid_convex
  rqa evaluate --model bm25 --trec-run runs/bm25-dev.trec --trec-qrels runs/reqa-dev.qrels
  rqa evaluate --model bm25 --dataset collection:collections/scifact --pool test   # your own"""


def add_parser(sub) -> None:
    """``rqa evaluate``'s parser.

    Args:
        sub: the subparsers of ``rqa``.
    """
    ev = add_command(sub, "evaluate", run=run, epilog=EXAMPLES,
                     help="evaluate a model on a pool: BM25, an exported model, frozen "
                          "embeddings, or a retrieval pipeline (--pipeline NAME)",
                     description="Evaluate a model on a pool with the shared evaluator: "
                                 "MRR, R@k, P@k (and their paragraph-level doc_ versions), "
                                 "settings in conf/eval/default.yaml.")
    from ..embeddings.evaluate import EMBEDDING_MODELS

    ev.add_argument("--model", default=None, choices=["bm25", *EMBEDDING_MODELS],
                    help="the model without training: bm25 (conf/model/bm25.yaml, its keys "
                         "as key=value), or frozen embeddings static:* / contextual:*; "
                         "default: bm25 unless --checkpoint is given")
    evaluate_embeddings.add_arguments(ev)
    ev.add_argument("--checkpoint", default=None, metavar="DIR",
                    help="evaluate this exported model folder instead (the `checkpoint` "
                         "printed by rqa train, or the --output of rqa export)")
    add_data_args(ev, paragraphs=True)
    ev.add_argument("--run-file", default=None, metavar="FILE",
                    help="write one JSON line per question here (its gold rank and top "
                         "candidates; rqa metrics recomputes the metrics from it)")
    ev.add_argument("--trec-run", default=None, metavar="FILE",
                    help="also write the run in TREC format (qid Q0 docid rank score tag): "
                         "each question's top top_k (conf/eval/default.yaml) ranked 1..k by "
                         "descending score, tied scores by descending docid as trec_eval "
                         "orders them; qid: the question id, else the row in the pool; "
                         "without --run-file no JSONL run file is kept")
    ev.add_argument("--trec-qrels", default=None, metavar="FILE",
                    help="also write the judgements in TREC format (qid 0 docid 1), one line "
                         "per gold candidate; rqa metrics / rqa compare read a TREC run with "
                         "them")
    ev.add_argument("--min-questions-per-answer", type=nonnegative_int, default=0, metavar="K",
                    help="evaluate on the one-to-many subset (answers with >= K questions; "
                         "default 0: the whole pool)")
    ev.add_argument("--work-dir", default=None,
                    help="--checkpoint: keep finished encoding shards here, so the same command "
                         "resumes after a crash without encoding them again")
    ev.add_argument("--cuda-graphs", action="store_true",
                    help="--checkpoint on a GPU: replay each batch shape as a CUDA graph "
                         "(opt-in; not yet measured on a GPU; no effect on a CPU)")
    ev.add_argument("--index", default=None, choices=["exact", "faiss-ivf", "faiss-hnsw"],
                    help="--checkpoint: exact search (the protocol's ranks), or an approximate "
                         "FAISS index whose lists are ranked, a gold not returned counted as "
                         "not found (docs/scale.md); default: index in conf/search.yaml")
    evaluate_pipeline.add_arguments(ev)
    ev.add_argument("--family", default=None, metavar="NAME",
                    help="on a test pool, the headline this evaluation competes for, as the "
                         "ledger of test-pool looks records it (default: $RQA_LEDGER_FAMILY, "
                         "else the model or pipeline name; retrieval_qa/evaluation/ledger.py)")
    ev.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                    help="--model bm25 settings over conf/model/bm25.yaml, e.g. k1=0.9 b=0.4; "
                         "with --pipeline, its keys, e.g. reranker.top_k=10")


def check_options(args) -> None:
    """Options of ``rqa evaluate`` that do not combine are an error, never silently ignored.

    Args:
        args: the parsed options.
    """
    embeddings = evaluate_embeddings.wanted(args)
    if args.checkpoint and args.model:
        raise ConflictingOptionsError(
            f"--model {args.model} and --checkpoint {args.checkpoint} do not combine: "
            "--checkpoint evaluates an exported model, --model a baseline or frozen embeddings "
            "(fix: give one of them)")
    if args.overrides and (args.checkpoint or embeddings):
        raise ConflictingOptionsError(
            f"settings {args.overrides} are conf/model/bm25.yaml keys, for --model bm25 only "
            "(fix: drop them, or evaluate --model bm25)")
    if args.work_dir and not args.checkpoint:
        raise ConflictingOptionsError("--work-dir keeps the encoding shards of --checkpoint "
                                      "(fix: give --checkpoint, or drop --work-dir)")
    if args.index and not args.checkpoint:
        raise ConflictingOptionsError(f"--index {args.index} searches the embeddings of "
                                      "--checkpoint (fix: give --checkpoint, or drop --index)")
    if args.cuda_graphs and not args.checkpoint:
        raise ConflictingOptionsError("--cuda-graphs encodes the model of --checkpoint "
                                      "(fix: give --checkpoint, or drop --cuda-graphs)")
    embedding_only = [f"--{name.replace('_', '-')}" for name in
                      ("idf", "layer_weights", "refiner", "pr_curve") if getattr(args, name)]
    if embedding_only and not embeddings:
        raise ConflictingOptionsError(
            f"{', '.join(embedding_only)}: options of frozen embeddings (--model static:* or "
            "contextual:*), not of --model bm25 or --checkpoint (fix: drop them)")
    if args.run_file and Path(args.run_file).is_dir():
        raise InputFileError("--run-file", args.run_file, "is a folder",
                             "give the path of the .jsonl file to write")


def check_trec(args) -> None:
    """``--trec-run`` / ``--trec-qrels``: paths that a write would not destroy, apart from
    each other and from ``--run-file``, on an evaluation that writes a run file.

    Args:
        args: the parsed options.
    """
    from ..data.paragraphs import DATASET as PARAGRAPHS
    from ..written import write_target

    given = [(o, v) for o, v in (("--trec-run", args.trec_run),
                                 ("--trec-qrels", args.trec_qrels)) if v]
    if given and args.dataset == PARAGRAPHS:
        raise ConflictingOptionsError(f"{given[0][0]}: the paragraph task ({PARAGRAPHS}) "
                                      "writes no run file (fix: drop it)")
    paths = [(o, v) for o, v in (("--run-file", args.run_file), *given) if v]
    for option, value in given:
        write_target(value, option)
    resolved = [Path(v).resolve() for _, v in paths]
    if len(set(resolved)) < len(resolved):
        raise ConflictingOptionsError(f"{', '.join(f'{o} {v}' for o, v in paths)}: the same "
                                      "file twice (fix: give each its own path)")


def run(args) -> dict:
    """``rqa evaluate``; an evaluation of a test pool is appended to the ledger of test-pool
    looks (:mod:`retrieval_qa.evaluation.ledger`). With ``--trec-run`` / ``--trec-qrels``
    the run file (a temporary one without ``--run-file``) is written in TREC format too.

    Args:
        args: the parsed options.
    """
    trec = bool(args.trec_run or args.trec_qrels)
    with contextlib.ExitStack() as stack:
        temporary = False
        if trec:
            check_trec(args)
            if not args.run_file and not args.pipeline:
                folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="rqa-trec-"))
                args.run_file, temporary = str(Path(folder) / "run.jsonl"), True
        result = _evaluate(args)
        if not isinstance(result, dict) or "metrics" not in result:
            return result
        if "dataset" in result:
            log_look(args, result, keep_record=not temporary)
        if trec:
            result["trec"] = _write_trec(args, result)
        if temporary:
            result["run_file"], result["per_question"] = None, None
    return result


def _write_trec(args, result: dict) -> dict:
    """The TREC files of the evaluation's run file (a pipeline's: its last stage's)."""
    from ..evaluation.trec import write_trec

    stages = result.get("stages")
    run_file = stages[-1].get("run_file") if stages else result.get("run_file")
    name = result.get("pipeline") or args.model or Path(str(args.checkpoint)).name
    return write_trec(run_file, args.trec_run, args.trec_qrels, tag=f"rqa-{name}")


def log_look(args, result: dict, keep_record: bool = True) -> dict | None:
    """The ledger line of one ``rqa evaluate`` (None when its pool is not a test pool).

    Args:
        args: the parsed options.
        result: the command's result (its metrics, pool and record paths).
        keep_record: False when the record is a temporary file (only its ranks are kept).
    """
    from ..evaluation import ledger

    record, ranks = _record_of(result), None
    if record is not None and record.is_file():
        from ..evaluation.per_question import read_per_question

        ranks = read_per_question(record).ranks
    if not keep_record:
        record = None
    if getattr(args, "pipeline", None):
        kind, name, settings = "pipeline", result.get("pipeline", args.pipeline), \
            result.get("settings")
        checkpoint = None
    else:
        kind = "evaluate"
        name = args.checkpoint and (result.get("settings") or {}).get("experiment") \
            or args.model or "checkpoint"
        settings, checkpoint = result.get("settings"), args.checkpoint
        training = args.checkpoint and _training_config(args.checkpoint)
        if training:  # two trainings of one architecture are two configurations
            settings = {"model": settings, "training": training}
    subset = None
    if getattr(args, "max_questions", None):
        subset = f"{result.get('questions')} questions drawn by --max-questions"
    elif getattr(args, "min_questions_per_answer", 0):
        subset = f"answers asked by >= {args.min_questions_per_answer} questions"
    seed = None
    if isinstance(settings, dict):  # a training's seed, else the model's or pipeline's
        seed = (settings.get("training") or settings).get("seed")
    return ledger.record(dataset=result["dataset"], pool=result["pool"],
                         metrics=result["metrics"], questions=int(result.get("questions", 0)),
                         kind=kind, name=str(name), settings=settings,
                         overrides=list(args.overrides or ()), checkpoint=checkpoint,
                         ranks=ranks, record_file=record, subset=subset,
                         family=getattr(args, "family", None), seed=seed)


def _training_config(checkpoint: str) -> dict | None:
    """The composed config of the run that trained ``checkpoint`` (``config.yaml`` in its run
    folder, beside ``model/``), None for an export without one (an off-the-shelf model, a
    copied folder)."""
    path = Path(checkpoint).parent / "config.yaml"
    if not path.is_file():
        return None
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(path), resolve=False)


def _record_of(result: dict) -> Path | None:
    """The per-question record an evaluation wrote (beside its run file), if any."""
    from ..evaluation.per_question import beside_run_file

    if result.get("per_question"):
        return Path(result["per_question"])
    stages = result.get("stages")
    run_file = stages[-1].get("run_file") if stages else result.get("run_file")
    return beside_run_file(run_file) if run_file else None


def _evaluate(args) -> dict:
    from omegaconf import OmegaConf

    from ..config import apply_overrides, eval_settings, model_defaults

    eval_cfg = eval_settings()
    if evaluate_pipeline.wanted(args):  # so one of its options given without --pipeline is
        return evaluate_pipeline.run(args, eval_cfg)  # an error there
    check_options(args)
    if not args.checkpoint and not args.model:
        args.model = "bm25"
    if evaluate_embeddings.wanted(args):
        return evaluate_embeddings.run(args, eval_cfg)
    if args.checkpoint:
        from ..models.artifact import load_artifact

        model = load_artifact(args.checkpoint)  # before the pool: a wrong folder fails at once
    else:  # the settings are checked before any data is read
        bm25_cfg = apply_overrides(OmegaConf.create(model_defaults("bm25")), args.overrides)
    pool, notes = load(args)
    if args.min_questions_per_answer:
        from ..data.subsets import one_to_many_subset

        pool = one_to_many_subset(pool, args.min_questions_per_answer)
    start = time.perf_counter()
    if args.checkpoint:
        return _checkpoint(args, model, pool, notes, eval_cfg, start)
    from ..baselines.bm25 import BM25Scorer, BM25Settings
    from ..evaluation.evaluator import evaluate

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
            "seconds": round(time.perf_counter() - start, 3), **unit_counts(notes),
            "skipped_records": notes.get("skipped_records")}


def _checkpoint(args, model, pool, notes, eval_cfg, start: float) -> dict:
    """An exported model (``--checkpoint``) on the pool."""
    from ..config import search_settings
    from ..evaluation.dense import evaluate_model

    search = search_settings()  # large pools: column chunks, or --index
    if args.index:
        search.index = args.index
    if args.work_dir:
        model.work_dir = Path(args.work_dir)
    if args.cuda_graphs:
        model.cuda_graphs = True
    sizes = eval_cfg.encode_batch_size
    device = getattr(getattr(model, "device", None), "type", "cpu")
    result = evaluate_model(model, pool, batch_size=sizes.get(device, sizes.cpu),
                            top_k=eval_cfg.top_k, memory_mb=eval_cfg.memory_mb,
                            ks=tuple(eval_cfg.ks), doc_level=eval_cfg.doc_level,
                            run_file=args.run_file, progress=not args.quiet, search=search)
    return {**result.summary(), **_sse(args, pool, result.extra["question_embeddings"]),
            "dataset": pool.dataset, "pool": pool.pool,
            "model": args.checkpoint, "settings": model.meta,
            "encode_seconds": result.extra["encode_seconds"],
            "seconds": round(time.perf_counter() - start, 3), **unit_counts(notes),
            "skipped_records": notes.get("skipped_records")}


def _sse(args, pool, question_embeddings) -> dict:
    """With --min-questions-per-answer N: the SSE of Cross-VAEs Table 3 over the questions of
    the answers with at least N questions (mean squared distance of l2-normalised question
    embeddings over the pairs of questions sharing an answer; retrieval_qa/evaluation/sse.py)."""
    if not args.min_questions_per_answer:
        return {}
    from ..evaluation.sse import pool_sse

    stats = pool_sse(question_embeddings, pool, max(args.min_questions_per_answer, 2))
    return {"sse": None if stats.answers == 0 else round(stats.value, 4),
            "sse_pairs": stats.pairs, "sse_answers": stats.answers,
            "sse_definition": "mean over question pairs sharing an answer of "
                              "||q_i/|q_i| - q_j/|q_j|||^2"}
