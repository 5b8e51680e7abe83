"""A pooler, a callback and a logger are each a class and a YAML block: toy ones written into
the test's temporary folder (nothing in the repository names them) are built by `rqa train`
from an experiment file's blocks, and the exported towers load back with their pooler."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import tiny, tiny_overrides  # setup_dirs: tests/training/conftest.py

from retrieval_qa.cli import main

TOY_PARTS = '''
"""A max pooler, a callback that counts training batches, a logger of JSON lines."""
import json
from pathlib import Path

import pytorch_lightning as pl
from pytorch_lightning.loggers.logger import Logger

from retrieval_qa.encoders.poolers import Pooler


class MaxPooler(Pooler):
    def __init__(self, hidden_size, fill):
        super().__init__()
        self.output_dim, self.fill = hidden_size, fill

    def forward(self, states, attention_mask):
        return states.masked_fill(~attention_mask.bool()[..., None], self.fill).amax(1)


class CountBatches(pl.Callback):
    def __init__(self, dirpath, file):
        self.path, self.batches = Path(dirpath).parent / file, 0

    def on_train_batch_end(self, *args):
        self.batches += 1
        self.path.write_text(str(self.batches))


class JsonLinesLogger(Logger):
    def __init__(self, run_dir, run_name, file):
        super().__init__()
        self.path, self.run_name = Path(run_dir) / file, run_name

    name = "jsonl"
    version = 0

    def log_hyperparams(self, params, *args, **kwargs):
        pass

    def log_metrics(self, metrics, step=None):
        with self.path.open("a") as f:
            f.write(json.dumps({"run": self.run_name, "step": step, **metrics}) + "\\n")
'''

TOY_EXPERIMENT = '''
extends: dual_gru
description: "dual_gru with a max pooler, a batch counter and a JSON-lines logger"
model:
  towers:
    pooler: {_target_: toy_parts.MaxPooler, fill: -1.0e4}
trainer:
  callbacks:
    count_batches: {_target_: toy_parts.CountBatches, file: batches.txt}
logger: {_target_: toy_parts.JsonLinesLogger, file: metrics.jsonl}
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    code = tmp_path / "code"
    code.mkdir()
    (code / "toy_parts.py").write_text(textwrap.dedent(TOY_PARTS))
    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    (conf / "toy_parts.yaml").write_text(TOY_EXPERIMENT)
    monkeypatch.syspath_prepend(str(code))
    monkeypatch.setenv("RQA_CONF_PATH", str(tmp_path / "conf"))
    yield tmp_path
    sys.modules.pop("toy_parts", None)


def _overrides(setup_dirs, out) -> list[str]:
    """The tiny run's settings, less those of the multi-hop pooler and the logger it replaces."""
    return [o for o in tiny_overrides(setup_dirs, out, "trainer.max_epochs=1", "threads=1")
            if not o.startswith(("experiment=", "model.towers.pooler.", "logger."))]


def test_a_pooler_callback_and_logger_are_each_a_class_and_a_yaml_block(toy, setup_dirs,
                                                                         capsys):
    from retrieval_qa.models.artifact import load_artifact

    assert main(["train", "experiment=toy_parts", *_overrides(setup_dirs, toy / "runs")]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    run = toy / "runs" / "toy_parts" / "cpu-seed42"
    assert int((run / "batches.txt").read_text()) == report["global_steps"] > 0
    logged = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert {x["run"] for x in logged} == {"toy_parts-cpu-seed42"}
    assert any("val/mrr" in x for x in logged)
    towers = json.loads((run / "model" / "model.json").read_text())["towers"]
    assert towers["pooler"] == {"_target_": "toy_parts.MaxPooler", "fill": -1.0e4}
    model = load_artifact(report["checkpoint"])  # rebuilt from model.json's blocks
    assert type(model.towers.question_tower.pooler).__name__ == "MaxPooler"
    assert model.encode_questions(["where is the city?"], progress=False).shape == (1, 16)


def test_a_new_block_is_set_whole_and_the_others_are_unchanged(toy, setup_dirs, tmp_path):
    from omegaconf import OmegaConf

    from retrieval_qa.training.compose import compose

    cfg = compose(["experiment=toy_parts", *_overrides(setup_dirs, tmp_path)])
    base = compose(["experiment=dual_gru", *_overrides(setup_dirs, tmp_path)])
    assert OmegaConf.to_container(cfg.model.towers.pooler) == {
        "_target_": "toy_parts.MaxPooler", "fill": -1.0e4}  # no multi-hop keys carried over
    assert list(cfg.trainer.callbacks) == [*base.trainer.callbacks, "count_batches"]
    assert cfg.model.towers.encoder == base.model.towers.encoder


def test_callback_blocks_build_in_order_and_null_turns_one_off(setup_dirs, tmp_path):
    from retrieval_qa.training.callbacks import (
        ResumableCheckpoints,
        StderrProgressBar,
        ValidateAtMaxSteps,
    )
    from retrieval_qa.training.trainer import build_callbacks

    cfg = tiny(setup_dirs, tmp_path, "trainer.callbacks.model_summary=null",
               "trainer.checkpoint_every_n_steps=7", "trainer.enable_progress_bar=true")
    callbacks = build_callbacks(cfg, tmp_path)
    assert [type(c).__name__ for c in callbacks] == [
        "ModelCheckpoint", "ResumableCheckpoints", "ValidateAtMaxSteps", "DivergenceStop",
        "StderrProgressBar"]
    resumable = callbacks[1]
    assert isinstance(resumable, ResumableCheckpoints) and resumable.every_n_steps == 7
    assert resumable.dirpath == tmp_path / "checkpoints" == Path(callbacks[0].dirpath)
    assert isinstance(callbacks[2], ValidateAtMaxSteps)
    assert isinstance(callbacks[4], StderrProgressBar) and callbacks[4].refresh_rate == 1
    quiet = build_callbacks(tiny(setup_dirs, tmp_path), tmp_path)  # enable_progress_bar=false
    assert not any(isinstance(c, StderrProgressBar) for c in quiet)
