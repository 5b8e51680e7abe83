"""``rqa mine --classifier CKPT --retriever CKPT --output DIR``: the miner of
:mod:`retrieval_qa.mining.miner` on a training pool; settings from ``conf/mine/default.yaml``,
flags override. Running the same command again resumes an interrupted job (finished shards are
not scored again); the JSON summary is the last line of stdout."""

from __future__ import annotations

from pathlib import Path

from ..config import mine_defaults
from ..errors import InputFileError
from .parsing import add_command

EXAMPLES = """\
example:
  rqa mine --classifier runs/mining_classifier/cpu-seed42/model \\
      --retriever runs/mining_dual/cpu-seed42/model --output runs/mined"""

_FLAGS = ("dataset", "pool", "max_documents", "seed", "top_k", "threshold", "weight_power",
          "shard_questions", "chunk_pairs", "score_batch_size", "device")


def add_parser(sub) -> None:
    """``rqa mine``'s parser.

    Args:
        sub: the subparsers of ``rqa``.
    """
    p = add_command(sub, "mine", run=run, epilog=EXAMPLES,
                    help="supervised mining: retriever neighbours labelled by the classifier "
                         "(resumes when --output exists)",
                    description="Supervised mining: the retriever's neighbours of each "
                                "question, labelled by the classifier; the pairs it accepts "
                                "are new training data. Resumes when --output exists.")
    p.add_argument("--classifier", required=True,
                   help="the classifier: the `checkpoint` folder of `rqa train "
                        "experiment=mining_classifier` (or a .ckpt of that run)")
    p.add_argument("--retriever", required=True,
                   help="an exported dual encoder (the `checkpoint` of rqa train / rqa export)")
    p.add_argument("--output", required=True, help="the job's folder (resumes when it exists)")
    p.add_argument("--data-dir", default=None, help="folder with squad/, mrqa/, multireqa/")
    defaults = mine_defaults()
    for key in _FLAGS:
        value = defaults[key]
        kind = float if isinstance(value, float) else int if isinstance(value, int) else str
        if key == "max_documents":
            kind = int
        p.add_argument(f"--{key.replace('_', '-')}", type=kind, default=None,
                       help=f"default {value} (conf/mine/default.yaml)")


def run(args) -> dict:
    """``rqa mine``: run (or resume) the mining job; its summary.

    Args:
        args: the parsed options.
    """
    import torch

    from ..data import load_pool
    from ..data.subsets import document_subset
    from ..mining.classifier_data import artifact_digest
    from ..mining.miner import Miner, MiningSettings
    from ..mining.scorer import ClassifierScorer
    from ..models.artifact import load_artifact

    for option, path in (("--classifier", args.classifier), ("--retriever", args.retriever)):
        if not Path(path).exists():  # before the pool is read
            raise InputFileError(option, path, "does not exist",
                                 "pass the `checkpoint` folder printed by `rqa train`")
    cfg = {k: (getattr(args, k) if getattr(args, k) is not None else v)
           for k, v in mine_defaults().items()}
    pool, notes = load_pool(cfg["dataset"], cfg["pool"], args.data_dir)
    pool = document_subset(pool, cfg["max_documents"], int(cfg["seed"]))
    device = cfg["device"] or ("cuda" if torch.cuda.is_available() else "cpu")
    retriever = load_artifact(args.retriever, map_location=device)
    if device != "cpu" and hasattr(retriever, "towers"):
        retriever.towers.to(device)
    scorer = ClassifierScorer.from_path(args.classifier, int(cfg["score_batch_size"]), device)
    settings = MiningSettings(**{k: cfg[k] for k in ("top_k", "threshold", "weight_power",
                                                     "shard_questions", "chunk_pairs")})
    retriever_id = {"digest": artifact_digest(args.retriever),
                    "label": (getattr(retriever, "meta", {}) or {}).get("pretrained")}
    miner = Miner(pool, retriever, scorer, args.output, settings, retriever_id, notes,
                  progress=not args.quiet,
                  paths={"classifier": str(args.classifier), "retriever": str(args.retriever)})
    return {"command": "mine", **miner.run(), "device": device,
            "max_documents": cfg["max_documents"]}
