"""A method is a module file plus a config file: a toy method written into the test's
temporary folder (nothing else in the repository knows it) trains, exports and evaluates
through `rqa train` / `rqa evaluate` / `rqa encode`; the eval group reaches `rqa train`."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import (  # setup_dirs: tests/training/conftest.py
    assert_ranks_fit_scores,
    pool_scores,
    tiny_overrides,
)

from retrieval_qa.cli import main
from retrieval_qa.data import load_pool
from retrieval_qa.evaluation.per_question import RUN_DIR_NAME, beside_run_file, read_per_question

TOY_MODULE = '''
"""A toy method: bag-of-embeddings towers (one shared table) and the in-batch softmax."""
import torch
from torch import nn

from retrieval_qa.losses import InBatchSoftmaxLoss
from retrieval_qa.models.base import RetrievalModule


class BagTowers(nn.Module):
    def __init__(self, vocab_size, dim):
        super().__init__()
        self.table = nn.Embedding(vocab_size, dim)
        self.output_dim = dim

    def _bag(self, input_ids, attention_mask, token_type_ids=None):
        mask = attention_mask[..., None].float()
        return (self.table(input_ids) * mask).sum(1) / mask.sum(1).clamp(min=1)

    encode_question = encode_answer = _bag

    def trainable_parameters(self):
        return {"total": sum(p.numel() for p in self.parameters())}


def build_bag_towers(cfg):
    return BagTowers(cfg["vocab_size"], cfg["dim"])


class ToyMethod(RetrievalModule):
    towers_builder = "toy_method.build_bag_towers"

    def __init__(self, towers, optimizer, evaluation):
        super().__init__(optimizer, "cosine", evaluation)
        self.save_hyperparameters()
        self.towers = build_bag_towers(towers)
        self.loss = InBatchSoftmaxLoss(similarity="cosine", scale=10.0, symmetric=False,
                                       gather_across_processes=False)

    def training_step(self, batch, batch_idx):
        q = self.towers.encode_question(**batch["question"])
        a = self.towers.encode_answer(**batch["answer"])
        loss = self.loss(q, a)
        self.log("train/loss", loss)
        return loss
'''

TOY_CONFIG = '''
description: "toy: bag-of-embeddings towers"
defaults: {model: null}
model:
  _target_: toy_method.ToyMethod
  towers:
    encoder: {pretrained: PRETRAINED, fallback: null}
    vocab_size: VOCAB
    dim: 8
  optimizer: {name: adam, lr: 0.01, weight_decay: 0.0, schedule: constant}
profiles:
  cpu:
    description: "toy, CPU profile (REDUCED): 2 epochs"
    trainer: {max_epochs: 2}
'''


def _common(setup_dirs, out) -> list[str]:
    """The data and trainer settings of the tiny runs, without the dual-GRU model keys."""
    return [o for o in tiny_overrides(setup_dirs, out) if not o.startswith(("model.", "experiment="))]


@pytest.fixture
def toy(setup_dirs, tmp_path, monkeypatch):
    root, vocab = setup_dirs
    code = tmp_path / "code"
    code.mkdir()
    (code / "toy_method.py").write_text(textwrap.dedent(TOY_MODULE))
    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    (conf / "toy.yaml").write_text(TOY_CONFIG.replace("PRETRAINED", str(root / "tokenizer"))
                                   .replace("VOCAB", str(vocab)))
    monkeypatch.syspath_prepend(str(code))
    monkeypatch.setenv("RQA_CONF_PATH", str(tmp_path / "conf"))
    yield tmp_path
    sys.modules.pop("toy_method", None)


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_a_new_method_is_a_module_file_and_a_config_file(toy, setup_dirs, capsys):
    root, _ = setup_dirs
    assert main(["train", "experiment=toy", "profile=cpu", *_common(setup_dirs, toy / "runs")]) == 0
    report = _last_json(capsys)
    assert report["experiment"] == "toy" and report["epochs"] == 2
    assert report["test"]["questions"] == 4 and "mrr" in report["test"]["metrics"]
    model_json = json.loads((toy / "runs" / "toy" / "cpu-seed42" / "model" / "model.json")
                            .read_text())
    assert model_json["builder"] == "toy_method.build_bag_towers"
    run_file = toy / "dev.jsonl"
    assert main(["evaluate", "--checkpoint", report["checkpoint"], "--dataset", "reqa_squad",
                 "--pool", "dev", "--data-dir", str(root / "data"), "--quiet",
                 "--run-file", str(run_file)]) == 0
    assert _last_json(capsys)["questions"] == 4
    # the same evaluator settings and code, other encoding batches: the post-training test
    # and rqa evaluate rank as the exported towers' scores do, up to near-ties
    pool, _ = load_pool("reqa_squad", "dev", root / "data", use_cache=False)
    scores = pool_scores(report["checkpoint"], pool)
    for record in (read_per_question(Path(report["checkpoint"]).parent / RUN_DIR_NAME),
                   read_per_question(beside_run_file(run_file))):
        assert_ranks_fit_scores(record, pool, scores, atol=1e-4)
    texts = toy / "q.txt"
    texts.write_text("where is the city?\n")
    assert main(["encode", "--checkpoint", report["checkpoint"], "--input", str(texts),
                 "--output", str(toy / "q.pt"), "--quiet"]) == 0
    assert _last_json(capsys)["dim"] == 8


def test_evaluate_reports_the_sse_of_the_one_to_many_subset(toy, setup_dirs, capsys):
    """Two distinct questions share the answer sentence "Berlin is in Germany.": the SSE is
    the squared distance of their l2-normalised embeddings, for any method's artefact."""
    import copy

    import torch
    from helpers import TINY_SQUAD, write_json_gz

    from retrieval_qa.models.artifact import load_artifact

    root, _ = setup_dirs
    assert main(["train", "experiment=toy", "profile=cpu", "trainer.max_epochs=1",
                 *_common(setup_dirs, toy / "runs")]) == 0
    checkpoint = _last_json(capsys)["checkpoint"]
    dev = copy.deepcopy(TINY_SQUAD)
    dev["data"][0]["paragraphs"][0]["qas"].append(
        {"id": "q6", "question": "Which country is Berlin in?",
         "answers": [{"answer_start": 70, "text": "Germany"}]})
    write_json_gz(toy / "data" / "squad" / "dev-v1.1.json.gz", dev)
    assert main(["evaluate", "--checkpoint", checkpoint, "--dataset", "reqa_squad", "--pool",
                 "dev", "--data-dir", str(toy / "data"), "--min-questions-per-answer", "2",
                 "--quiet", "--no-cache"]) == 0
    out = _last_json(capsys)
    assert out["questions"] == 2 and out["sse_pairs"] == 1 and out["sse_answers"] == 1
    q = load_artifact(checkpoint).encode_questions(
        ["Where is Berlin?", "Which country is Berlin in?"], progress=False)
    q = torch.nn.functional.normalize(q, dim=-1)
    assert out["sse"] == pytest.approx(float(((q[0] - q[1]) ** 2).sum()), abs=1e-4)


def test_eval_settings_reach_rqa_train(setup_dirs, tmp_path, capsys):
    assert main(["train", *tiny_overrides(setup_dirs, tmp_path, "trainer.max_epochs=1",
                                          "eval.ks=[1,3]", "eval.doc_level=false")]) == 0
    report = _last_json(capsys)
    metrics = report["test"]["metrics"]
    assert "r@3" in metrics and "r@5" not in metrics and "doc_mrr" not in metrics
    assert "val/r@3" in report["last_val"] and "val/r@5" not in report["last_val"]
    assert report["eval"]["ks"] == [1, 3]


def test_an_unknown_target_names_the_config_node(setup_dirs, tmp_path, capsys):
    assert main(["train", *tiny_overrides(setup_dirs, tmp_path,
                                          "model._target_=no_such_module.Method")]) == 2
    assert "_target_='no_such_module.Method'" in capsys.readouterr().err


def test_a_new_method_joins_every_list_with_no_edit(toy, capsys):
    """The toy method (a module on sys.path and an experiment in $RQA_CONF_PATH, with a gpu
    profile) is found wherever the suite lists methods: rqa train --help, the composition and
    profile tests (conf_names), the GPU queue's generated lines and the device checklist's
    per-experiment items. No list names a method by hand."""
    from experiments.device.checklist import CHECKLIST, parse_checklist
    from retrieval_qa.config import compose, conf_names
    from retrieval_qa.sweeps.queue import expand_experiments

    path = toy / "conf" / "experiment" / "toy.yaml"
    path.write_text(path.read_text() + '  gpu:\n    description: "toy, GPU profile (REDUCED)"\n'
                    "    trainer: {max_epochs: 2}\n")  # a profile under `profiles:`
    with pytest.raises(SystemExit) as done:
        main(["train", "--help"])
    assert done.value.code == 0 and "toy" in capsys.readouterr().out
    assert "toy" in conf_names("experiment")
    assert compose(["experiment=toy", "profile=gpu"]).model._target_ == "toy_method.ToyMethod"
    queued = expand_experiments(["profile=gpu", "seed=1"], [], [], "every method")
    assert ["experiment=toy", "profile=gpu", "seed=1"] in [r.words for r in queued]
    assert "smoke-toy" in [item.id for item in parse_checklist(CHECKLIST)]

