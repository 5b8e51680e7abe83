"""Train the cross-encoder reranker on ReQA SQuAD training pairs with first-stage hard
negatives and export it as a sentence-transformers CrossEncoder folder:

    python -m retrieval_qa.classifiers.train_reranker [--config FILE] [key=value ...]

Settings: ``conf/pipeline/training/reranker.yaml`` (key=value overrides its keys). Prints one
JSON object (the settings, example counts, losses, time, the export folder). The Trainer is
:func:`~retrieval_qa.training.trainer.build_trainer`'s (conf/trainer/classifier.yaml); the
resumable ``<output>/checkpoints/last.ckpt`` is written at each epoch's end, on a clock and on
SIGTERM/SIGINT, and the same command resumes from it to the uninterrupted run's weights."""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch

from ..config import load_yaml_file, model_defaults, plain, reranker_training
from ..runtime import machine_info
from ..training.trainer import fit
from ..written import write_text

#: the caps: each stops the same steps early (a capped training resumes under another cap, or
#: none): the wall clock, or a step of the schedule
CAPS = ("max_minutes", "stop_after_steps")
#: settings that do not decide what is trained: where, how to resume, and the caps
NEUTRAL = ("output", "resume", *CAPS)


def _collate(model, listwise: bool):
    """Batches of pairs (``listwise`` false), or of groups (each a question's gold example
    and its negatives), flattened with each row's ``group``."""
    from .pair_data import encode_pairs

    def collate(items):
        examples = [e for group in items for e in group] if listwise else items
        enc = encode_pairs(model.tokenizer, [e.question for e in examples],
                           [model.candidate_text(e.sentence, e.paragraph) for e in examples],
                           model.max_length)
        enc["labels"] = torch.tensor([e.label for e in examples], dtype=torch.float32)
        if listwise:
            enc["group"] = torch.tensor([g for g, group in enumerate(items) for _ in group])
        return enc
    return collate


def question_groups(examples: list) -> list[list]:
    """The examples of :func:`~.reranker_data.rerank_examples` (each question's gold example,
    then its negatives) cut into one group per question.

    Args:
        examples: the examples in :func:`~.reranker_data.rerank_examples`'s order (each
            group starts with its gold example, ``label`` 1).
    """
    groups: list[list] = []
    for e in examples:
        if e.label == 1:
            groups.append([])
        groups[-1].append(e)
    return groups


def train_reranker(cfg: dict, data_dir=None, progress: bool = True) -> dict:
    """Build the examples, train the reranker with the settings ``cfg``
    (conf/pipeline/training/reranker.yaml's keys) and export it to ``cfg["output"]``; the
    JSON report. The training keeps its resumable checkpoints in ``<output>/checkpoints``
    (with the settings they belong to): the same settings again resume from them (a finished
    training: nothing more is trained), other settings are refused unless
    ``resume=never``.

    Args:
        cfg: the settings, the keys of conf/pipeline/training/reranker.yaml (``output``: the
            export folder).
        data_dir: the data folder; None: $RQA_DATA_DIR, then ``../shared/data``.
        progress: show the first stage's progress (BM25's, or the pipeline's).

    Example::

        cfg = plain(reranker_training())
        report = train_reranker({**cfg, "questions": 500, "output": "runs/reranker/small"})
    """
    from ..baselines.bm25 import BM25Scorer, BM25Settings
    from ..data import load_pool
    from ..data.resumable import ResumableShuffleLoader
    from ..data.subsets import question_subset
    from .reranker import CrossEncoderReranker
    from .reranker_data import bm25_top, rerank_examples, training_side
    from .train_classifier import LossRecorder, classifier_trainer, resumable_training

    if cfg["loss"] not in ("listwise", "bce"):  # before any data is read
        raise ValueError(f"loss={cfg['loss']!r}; expected listwise or bce")
    output = Path(cfg["output"])
    checkpoint = resumable_training(
        output, _training_settings(cfg), str(cfg["resume"]),
        "output=DIR to train into a folder of its own, or resume=never to start "
        f"{output / 'checkpoints'} over")
    start = time.perf_counter()
    full, _ = load_pool(cfg["dataset"], cfg["pool"], data_dir)
    side, _ = training_side(full, cfg["val_fraction"], cfg["split_seed"])
    pool = question_subset(side, cfg["questions"], cfg["seed"])
    first_stage = _first_stage(cfg.get("first_stage"))
    if first_stage is None:
        scorer = BM25Scorer(pool, BM25Settings.from_config(model_defaults("bm25")),
                            progress=progress)
        top, hard_source = bm25_top(pool, scorer, int(cfg["bm25_top_k"])), "bm25"
    else:
        top = first_stage(pool, data_dir=data_dir, progress=progress)
        hard_source = first_stage.name
    examples, counts = rerank_examples(pool, top, hard=int(cfg["hard_negatives"]),
                                       same_paragraph=int(cfg["same_paragraph_negatives"]),
                                       seed=int(cfg["seed"]), hard_source=hard_source)
    data_seconds = time.perf_counter() - start
    settings = CrossEncoderReranker.settings(cfg.get("model") or {})
    torch.manual_seed(int(cfg["seed"]))
    model = CrossEncoderReranker(**settings)
    batch_size = int(settings["training"]["batch_size"])
    listwise = cfg["loss"] == "listwise"
    items = question_groups(examples) if listwise else examples
    if listwise:  # batch_size pairs a step: as many whole groups as fit
        batch_size = max(1, batch_size // (1 + int(cfg["hard_negatives"])
                                           + int(cfg["same_paragraph_negatives"])))
    random.Random(int(cfg["seed"])).shuffle(items)
    loader = ResumableShuffleLoader(items, seed=int(cfg["seed"]), batch_size=batch_size,
                                    collate_fn=_collate(model, listwise))
    steps = int(cfg["epochs"]) * len(loader)
    recorder = LossRecorder(steps, 25, "reranker")
    trainer = classifier_trainer(output, recorder, cfg.get("max_minutes"),
                                 stop_after_steps=cfg.get("stop_after_steps"), max_steps=steps,
                                 max_epochs=int(cfg["epochs"]),
                                 accelerator=settings["training"]["accelerator"])
    train_start = time.perf_counter()
    fit(trainer, model, checkpoint, train_dataloaders=loader)
    train_seconds = time.perf_counter() - train_start
    model.eval()
    folder = model.export(output)
    losses = recorder.losses
    stop = cfg.get("stop_after_steps")
    step_capped = stop is not None and int(stop) <= len(losses) < steps
    time_capped = len(losses) < steps and not step_capped
    if time_capped or step_capped:  # a reduced training: say so, and how to finish it
        cap = "stop_after_steps" if step_capped else "max_minutes"
        print(f"train_reranker: the {cap}={cfg[cap]} cap stopped the training "
              f"after {len(losses)} of {steps} steps, a reduced training; the same command "
              f"with {cap}=null trains the rest (it resumes from the last checkpoint)",
              file=sys.stderr, flush=True)
    return {"output": str(folder), "pretrained": model.pretrained_checkpoint.label,
            "train_side_questions": len(side.questions), "questions": len(pool.questions),
            "candidates_bm25": len(pool.candidates), "examples": len(examples),
            "example_counts": counts, "steps_planned": steps, "steps_done": len(losses),
            "time_capped": time_capped, "step_capped": step_capped,
            "loss": cfg["loss"], "batch_size": batch_size,
            "batch_unit": "questions (groups)" if listwise else "pairs",
            "first_loss": round(losses[0], 4) if losses else None,
            "last_loss": round(statistics.fmean(losses[-25:]), 4) if losses else None,
            "loss_curve": recorder.curve(),
            "machine": machine_info(torch.get_num_threads(), ("transformers",)),
            "data_seconds": round(data_seconds, 1), "train_seconds": round(train_seconds, 1),
            "resumed_from": None if checkpoint is None else str(checkpoint),
            "first_stage": None if first_stage is None else first_stage.info,
            "settings": cfg}


def finished_report(cfg: dict) -> dict | None:
    """The report (``<output>/training.json``) of a finished training of these settings, or
    None. The command reuses it as it is, so that running it again leaves the export's files,
    and the digests that key the teacher's scores (retrieval_qa/distill/cache.py), unchanged.
    A training its time cap stopped is finished for that cap only: under another cap (or
    none) it goes on from its last checkpoint.

    Args:
        cfg: the settings (conf/pipeline/training/reranker.yaml's keys, ``output`` among
            them); ``resume: never`` gives None.
    """
    path = Path(cfg["output"]) / "training.json"
    if cfg.get("resume") == "never" or not path.is_file():
        return None
    report = json.loads(path.read_text())
    recorded = report.get("settings") or {}
    same = (_training_settings(recorded)
            == _training_settings(json.loads(json.dumps(cfg, default=str))))
    capped = report.get("time_capped") or report.get("step_capped")
    if capped and any(recorded.get(k) != cfg.get(k) for k in CAPS):
        return None
    return report if same else None


def _training_settings(cfg: dict) -> dict:
    """The settings that decide what is trained: ``cfg`` less :data:`NEUTRAL`, and less
    ``model.reads`` where it is ``sentence``, what a training recorded before that setting
    existed read."""
    out = {k: v for k, v in cfg.items() if k not in NEUTRAL}
    if isinstance(out.get("model"), dict) and out["model"].get("reads") == "sentence":
        out["model"] = {k: v for k, v in out["model"].items() if k != "reads"}
    return out


def _first_stage(block):
    """The hard negatives' source that a ``first_stage`` block names (its ``_target_``, e.g.
    :class:`retrieval_qa.distill.negatives.FirstStageNegatives`, given the ``eval`` block as
    ``evaluation``); None: BM25's top ``bm25_top_k``."""
    if block is None:
        return None
    from ..config import eval_settings
    from ..registry import config_values, instantiate

    return instantiate(block, "first_stage", evaluation=config_values(eval_settings()))


def main(argv=None) -> int:
    """The command line (see the module docstring); the exit status.

    Args:
        argv: the arguments (``[--config FILE] [--data-dir DIR] [key=value ...]``); None:
            ``sys.argv[1:]``.
    """
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=None,
                   help="a YAML file (default: conf/pipeline/training/reranker.yaml)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    args = p.parse_args(argv)
    from ..config import compose_file
    from ..errors import RunInterrupted, UsageError
    from ..runtime import apply_threads

    apply_threads(None)
    cfg = (load_yaml_file(args.config) if args.config
           else reranker_training())
    cfg = plain(compose_file(cfg, args.config or "conf/pipeline/training/reranker.yaml",
                             args.overrides))  # strict keys, conf/ranges.yaml
    import contextlib

    done = finished_report(cfg)
    if done is not None:
        print(f"train_reranker: {cfg['output']} holds this finished training "
              f"({done['steps_done']} of {done['steps_planned']} steps): nothing trained, its "
              "export and report kept", file=sys.stderr)
        print(json.dumps(done, default=str))
        return 0
    try:
        with contextlib.redirect_stdout(sys.stderr):  # libraries' prints stay off the JSON
            out = train_reranker(cfg, args.data_dir)
    except RunInterrupted as e:  # last.ckpt is saved: the same command resumes
        print(f"train_reranker: {e}", file=sys.stderr)
        print(json.dumps({"interrupted": True, "signal": e.signum, "checkpoint": e.checkpoint,
                          "global_step": e.global_step, "resume": "run the same command again"}))
        return e.exit_code
    except UsageError as e:  # bad input named with its fix (other settings in the folder...)
        print(f"train_reranker: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(out, default=str))
    write_text(Path(cfg["output"]) / "training.json", json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
