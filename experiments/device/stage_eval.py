"""The evaluation stage of a training cut into stages: a training stage's weights (its carry
set, restored: ``weights.ckpt`` and the run's ``config.yaml``), tested on the experiment's
test pool as ``rqa train`` tests it (the method built from the config, the weights loaded,
``Trainer.test`` over the data module), one JSON line on stdout.

    python experiments/device/stage_eval.py CARRIED_DIR [KEY=VALUE ...]
    python experiments/device/stage_eval.py --checkpoint CKPT --config YAML [--round-bf16]

``KEY=VALUE`` settings go over the run's config (the rehearsal's pool caps, say); the test
pool is the config's whole pool unless they cap it, and the JSON says which (``test``:
questions, candidates, ``capped``). The test's per-question record goes into ``--record-dir``
(default: the folder of ``--out``) as ``stage_eval.questions.jsonl.gz``, and a test pool's
look joins the ledger ($RQA_LEDGER) as ``rqa train``'s test would: a bundle brings both back,
and ``rqa ledger --keep`` commits the look. ``--checkpoint`` tests a checkpoint as saved, or with
``--round-bf16`` every floating weight rounded to bfloat16 and back, which is what a carried
set holds: the same model, bit for bit (tests/test_device_stages.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(ROOT)  # run as a script: the repository root first, not this folder


def load_state(path: Path, round_bf16: bool = False) -> tuple[dict, int | None]:
    """A checkpoint's state dict (rounded to bf16 and back with ``round_bf16``) and step."""
    import torch

    from experiments.device.carry import from_bf16, to_bf16

    saved = torch.load(path, map_location="cpu", weights_only=False)
    state = saved["state_dict"]
    if round_bf16:
        state = from_bf16(*to_bf16(state))
    return state, saved.get("global_step")


RECORD_NAME = "stage_eval.questions.jsonl.gz"


def evaluate(config: Path, weights: Path, overrides: list[str], round_bf16: bool = False,
             carried: dict | None = None, record_dir: Path | None = None) -> dict:
    """The test of the method of ``config`` with ``weights`` (see the module docstring).

    Args:
        config: the run's config.yaml (``rqa train`` writes it into the run folder).
        weights: a checkpoint with a ``state_dict``.
        overrides: ``KEY=VALUE`` settings over the config.
        round_bf16: round every floating weight to bfloat16 first.
        carried: the carry set's description (its carry.json), recorded as it is.
        record_dir: where the per-question record goes; None: none (the look is logged
            without one).
    """
    import pytorch_lightning as pl
    from omegaconf import OmegaConf

    from retrieval_qa.runtime import apply_threads
    from retrieval_qa.training.run import log_test_look, method_class, write_test_record
    from retrieval_qa.training.trainer import resolve_precision, silence_third_party_noise

    start = time.perf_counter()
    cfg = OmegaConf.merge(OmegaConf.load(config), OmegaConf.from_dotlist(overrides))
    apply_threads(cfg.threads)
    pl.seed_everything(cfg.seed, workers=True)
    built = method_class(cfg).build(cfg)
    module, data = built.module, built.data
    state, step = load_state(weights, round_bf16)
    module.load_state_dict(state)
    silence_third_party_noise()
    trainer = pl.Trainer(accelerator=cfg.trainer.accelerator, devices=1,
                         precision=resolve_precision(cfg.trainer), logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, use_distributed_sampler=False)
    trainer.test(module, datamodule=data, verbose=False)
    test = {**module.test_results, **data.describe().get("test", {})}
    if record_dir is not None:
        record_dir.mkdir(parents=True, exist_ok=True)
        test.update(write_test_record(module, data, record_dir, RECORD_NAME))
    log_test_look(cfg, overrides, test, module, weights, record_dir or weights.parent)
    return {"experiment": cfg.experiment, "profile": cfg.profile, "seed": cfg.seed,
            "description": cfg.get("description"), "global_steps": step,
            "precision": str(trainer.precision), "weights": str(weights),
            "weights_rounded_to_bf16": bool(round_bf16 or carried), "carried": carried,
            "overrides": overrides, "test": test,
            "seconds": round(time.perf_counter() - start, 1)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("carried", nargs="?", type=Path, default=None,
                    help="a restored carry set of weights (weights.ckpt, config.yaml)")
    ap.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    ap.add_argument("--checkpoint", type=Path, default=None,
                    help="instead of a carry set: a checkpoint as saved")
    ap.add_argument("--config", type=Path, default=None, help="with --checkpoint: its config")
    ap.add_argument("--round-bf16", action="store_true",
                    help="with --checkpoint: round its weights to bfloat16 first")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    ap.add_argument("--record-dir", type=Path, default=None,
                    help="the per-question record's folder (default: that of --out)")
    args = ap.parse_args(argv)
    if (args.carried is None) == (args.checkpoint is None):
        ap.error("give a carried folder, or --checkpoint with --config")
    if args.carried is not None and "=" in args.carried.name:  # overrides only
        args.overrides.insert(0, str(args.carried))
        args.carried = None
    record_dir = args.record_dir or (args.out.parent if args.out else None)
    if args.carried is not None:
        from experiments.device.carry import ABOUT_FILE, CONFIG_FILE, WEIGHTS_FILE

        about = json.loads((args.carried / ABOUT_FILE).read_text())
        out = evaluate(args.carried / CONFIG_FILE, args.carried / WEIGHTS_FILE,
                       args.overrides, carried=about, record_dir=record_dir)
    else:
        if args.config is None:
            ap.error("--checkpoint needs --config (the run's config.yaml)")
        out = evaluate(args.config, args.checkpoint, args.overrides, args.round_bf16,
                       record_dir=record_dir)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2, default=str) + "\n")
    print(json.dumps(out, default=str))
    return out


if __name__ == "__main__":
    main()
