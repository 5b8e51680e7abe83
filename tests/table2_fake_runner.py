"""A stand-in for `rqa` in the reproduce-table2 tests (RQA_TABLE2_RUNNER): answers at once with
fixed metrics and logs every call to $RQA_FAKE_LOG."""

from __future__ import annotations

import json
import os
from pathlib import Path


def fake_rqa(*args: str) -> dict:
    with open(os.environ["RQA_FAKE_LOG"], "a") as f:
        f.write(json.dumps(list(args)) + "\n")
    if args[0] == "train":  # what rqa train leaves: its config, its export and its result
        from omegaconf import OmegaConf

        from retrieval_qa.training.compose import compose
        from retrieval_qa.training.run_folder import run_dir

        cfg = compose(args[1:])
        model = run_dir(cfg) / "model"
        model.mkdir(parents=True, exist_ok=True)
        (model.parent / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
        report = {"checkpoint": str(model), "experiment": cfg.experiment, "profile": cfg.profile,
                  "pretrained": "tiny", "resumed_from": None, "global_steps": 3}
        (model.parent / "result.json").write_text(json.dumps(report))
        return report
    pool = args[args.index("--pool") + 1]
    if args[0] == "evaluate" and args[-1] != "--quiet":
        raise AssertionError(args)
    if "bm25" in args and pool == "dev":  # what the committed reference holds: "matches"
        reference = Path(__file__).resolve().parents[1] / "results/table2/BM25-dev.json"
        metrics = {k: v for k, v in json.loads(reference.read_text())["metrics"].items()
                   if k in ("mrr", "r@1", "r@5")}
    else:
        metrics = {"mrr": 20.5, "r@1": 63.526, "r@5": 81.5827}
    return {"metrics": metrics, "questions": 4,
            "pool": pool, "run_file": args[args.index("--run-file") + 1]}
