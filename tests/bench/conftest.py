"""The benches' fixtures: a tiny random BERT (with the synthetic data's word tokenizer) that
both sides load, the synthetic SQuAD files as the data dir, and the checks every training
bench JSON passes, whichever loop wrote it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import make_dirs, synthetic_squad


@pytest.fixture
def tiny_setup(tmp_path, monkeypatch, one_thread) -> Path:
    """$RQA_DATA_DIR: the synthetic SQuAD train and dev files; returns a tiny random BERT
    folder (hidden 16, one layer) with their word tokenizer, loadable by both sides."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    root, vocab = make_dirs(tmp_path, dev=synthetic_squad(n_paragraphs=12))
    monkeypatch.setenv("RQA_DATA_DIR", str(root / "data"))
    model = tmp_path / "tiny-bert"
    BertTokenizerFast.from_pretrained(root / "tokenizer").save_pretrained(model)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=vocab, hidden_size=16, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=32,
                         max_position_embeddings=128)).save_pretrained(model)
    return model


def check_training_json(out: dict, path: Path, precision: str) -> None:
    """What bench/bench_training.py writes on the CPU, in either loop: the file is the result,
    the first batch agrees, rates and ratios are consistent, no GPU figure (and why)."""
    assert json.loads(path.read_text()) == json.loads(json.dumps(out))
    assert out["command"].startswith("python -m bench.bench_training --device cpu")
    assert out["device"] == {"type": "cpu", "precision": precision,
                             "name": out["machine"]["cpu"]}
    for package in ("torch", "transformers", "sentence_transformers", "pytorch_lightning"):
        assert out["machine"][package]
    check = out["first_batch_check"]
    assert check["same_input_ids"] and check["same_initial_weights"]
    assert check["loss_abs_diff"] < 1e-5 and check["grad_relative_diff"] < 1e-3
    for side in ("ours", "sentence_transformers"):
        assert out[f"{side}_steps_per_s"] > 0
        assert math.isclose(out[f"{side}_pairs_per_s"],
                            out[f"{side}_steps_per_s"] * out["settings"]["batch_size"])
        assert math.isfinite(out["mean_train_loss"][side])
        assert out["gpu_utilization"][side] is None  # on the CPU: null, and why
    assert math.isclose(out["ratio_ours_over_st"], out["ours_steps_per_s"]
                        / out["sentence_transformers_steps_per_s"])
    assert "cpu" in out["gpu_utilization"]["missing_because"]
    assert out["wall_s"] > 0 and len(out["machine"]["load_avg_end"]) == 3


@pytest.fixture
def training_json():
    """:func:`check_training_json`, for the tests of each loop."""
    return check_training_json
