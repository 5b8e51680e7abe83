"""``rqa evaluate --model static:*|contextual:* [--idf] --dataset squad_paragraphs|reqa_squad``:
the options of frozen embeddings and their evaluation (:mod:`retrieval_qa.embeddings.evaluate`)."""

from __future__ import annotations

import argparse

from ..errors import ConflictingOptionsError, UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of frozen embeddings.

    Args:
        p: the parser of ``rqa evaluate``.
    """
    from ..embeddings.idf import IDF_CORPORA

    p.add_argument("--idf", action="store_true",
                   help="static:* models: IDF-weighted mean pooling (IDF on the indexed corpus)")
    p.add_argument("--idf-corpus", default="paragraphs", choices=IDF_CORPORA,
                   help="squad_paragraphs: IDF over the paragraphs, or paragraphs and questions")
    p.add_argument("--layer-weights", default=None,
                   help="contextual:minilm: comma-separated weights of its 7 layers (0: the "
                        "token-embedding layer, 1-6: hidden layers); default 1,0,0,0,0,0,0")
    p.add_argument("--refiner", default=None,
                   help="reqa_*: a trained residual refiner (the model folder of rqa train "
                        "experiment=fcrr ...) applied to the static vectors: questions by its "
                        "question side, candidate sentences by its paragraph side")
    p.add_argument("--pr-curve", default=None,
                   help="squad_paragraphs: write the precision-recall curve PNG here")


def wanted(args) -> bool:
    """Whether the command evaluates frozen embeddings (their model, or the paragraph task).

    Args:
        args: the parsed options.
    """
    from ..data.paragraphs import DATASET as PARAGRAPHS

    return args.dataset == PARAGRAPHS or str(args.model).startswith(("static:", "contextual:"))


def _layer_weights(text: str) -> list[float]:
    try:
        return [float(w) for w in text.split(",")]
    except ValueError:
        raise UsageError(f"--layer-weights {text!r}: not comma-separated numbers (fix: give "
                         "one weight per layer, e.g. --layer-weights 1,0,0,0,0,0,0)") from None


def run(args, eval_cfg) -> dict:
    """Evaluate frozen embeddings: the paragraph task, or ReQA with a ``static:*`` model.

    Args:
        args: the parsed options.
        eval_cfg: the ``eval`` settings (conf/eval/default.yaml).
    """
    from ..data.paragraphs import DATASET as PARAGRAPHS
    from ..embeddings.evaluate import EMBEDDING_MODELS, evaluate_paragraph_task, evaluate_reqa

    if args.checkpoint:
        raise ConflictingOptionsError("--checkpoint and --model static:* / --dataset "
                                      "squad_paragraphs do not combine (fix: give one)")
    if args.dataset == PARAGRAPHS:
        if args.model not in EMBEDDING_MODELS:
            raise UsageError(f"--dataset {PARAGRAPHS} evaluates frozen embeddings (fix: give "
                             f"--model, one of {list(EMBEDDING_MODELS)})")
        weights = _layer_weights(args.layer_weights) if args.layer_weights else None
        return evaluate_paragraph_task(args.model, args.idf, args.pool or "dev", args.data_dir,
                                       args.idf_corpus, args.pr_curve,
                                       use_cache=not args.no_cache, layer_weights=weights)
    if not args.model.startswith("static:"):
        raise UsageError(f"--model {args.model} on {args.dataset}: only static:* models are "
                         "wired to sentence retrieval so far (fix: give --model static:*, or "
                         "--dataset squad_paragraphs)")
    return evaluate_reqa(args.model, idf=args.idf, dataset=args.dataset, pool_name=args.pool,
                         data_dir=args.data_dir, strict=not args.lenient,
                         use_cache=not args.no_cache, refiner=args.refiner,
                         run_file=args.run_file, progress=not args.quiet, evaluation=eval_cfg)
