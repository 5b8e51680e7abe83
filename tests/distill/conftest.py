"""Fixtures of the distillation tests: the synthetic training file and a tiny teacher world
(tests/distill_helpers.py), made once per session."""

from __future__ import annotations

import pytest
from distill_helpers import make_teacher_world
from helpers import TINY_SQUAD, eval_conf, make_dirs


@pytest.fixture(scope="session")
def world(tmp_path_factory):
    import torch
    from transformers import BertTokenizerFast

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    root, _ = make_dirs(tmp_path_factory.mktemp("distill"), TINY_SQUAD)
    tokenizer = BertTokenizerFast.from_pretrained(root / "tokenizer")
    out = {"root": root, "data": root / "data", "tokenizer": root / "tokenizer",
           **make_teacher_world(root, root / "data", tokenizer)}
    torch.set_num_threads(before)
    return out


@pytest.fixture
def settings(world, tmp_path):
    """(teacher block, data block, eval block) of the tiny world, scores into tmp_path."""
    teacher = {"pipeline": str(world["pipeline"]), "reranker": None, "questions": 20,
               "seed": 0, "list_size": 4, "shard_questions": 6, "batch_size": 8,
               "device": "cpu", "output": str(tmp_path / "teacher")}
    data = {"train_dataset": "reqa_squad", "train_pool": "train", "val_fraction": 0.1,
            "split_seed": 0, "data_dir": str(world["data"])}
    return teacher, data, eval_conf()
