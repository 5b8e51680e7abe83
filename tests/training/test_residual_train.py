"""`rqa train experiment=fcrr|convrr|fcrr_convrr` and `rqa evaluate --model static:*` end
to end on a synthetic SQuAD-format data dir and tiny random word vectors."""

from __future__ import annotations

import json
import signal

import numpy as np
import pytest
import torch
from helpers import (
    TINY_SQUAD,
    WORDS,
    final_weights,
    from_conf,
    signal_at_step,
    synthetic_squad,
    write_json_gz,
)
from omegaconf import OmegaConf

from retrieval_qa.cli import main
from retrieval_qa.data.vector_datamodule import ParagraphVectorDataModule, VectorSplit
from retrieval_qa.embeddings import base
from retrieval_qa.embeddings.static import read_vectors
from retrieval_qa.evaluation import read_run_file
from retrieval_qa.registry import config_values
from retrieval_qa.training.compose import compose, load_group

#: conf/model/residual.yaml's loss settings (their one source)
TRIPLET = {k: v for k, v in config_values(load_group("model", "residual").loss).items()
           if k != "name"}


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    from retrieval_qa.embeddings import evaluate as embedding_evaluate

    write_json_gz(tmp_path / "data" / "squad" / "train-v1.1.json.gz", synthetic_squad())
    write_json_gz(tmp_path / "data" / "squad" / "dev-v1.1.json.gz", TINY_SQUAD)
    words = [*WORDS, "fact", "place", "city", "number", "which", "form", "paris", "berlin",
             "france", "capital", "?", ".", *map(str, range(400))]
    rng = np.random.default_rng(0)
    np.save(tmp_path / "m.npy", rng.standard_normal((len(words), 16)).astype(np.float32))
    (tmp_path / "vocab.txt").write_text("\n".join(words))
    vectors = read_vectors("tiny", tmp_path / "m.npy", tmp_path / "vocab.txt")
    monkeypatch.setattr(base, "load_static", lambda name: vectors)
    monkeypatch.setattr(embedding_evaluate, "load_static", lambda name: vectors)
    return tmp_path / "data"


def _overrides(data_dir, out, experiment):
    return [f"experiment={experiment}", "profile=cpu", f"data.data_dir={data_dir}",
            "data.val_questions=20", "data.batch_size=32", "data.eval_batch_size=64",
            "model.conv_filters=8", "trainer.max_epochs=2", "logger.name=none",
            f"output_dir={out}"]


@pytest.mark.parametrize("experiment", ["fcrr", "convrr", "fcrr_convrr"])
def test_train_prints_test_r1_and_ap_last(data_dir, tmp_path, capsys, experiment):
    assert main(["train", *_overrides(data_dir, tmp_path / "runs", experiment)]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["experiment"] == experiment and report["epochs"] == 2
    assert report["test"]["questions"] == 5 and report["test"]["paragraphs"] == 2
    assert {"r@1", "r@50", "ap", "avg_recall"} <= set(report["test"])
    assert report["data"]["train_pairs"] == 40 * 4 + 8 * 2 + 1 - 20
    assert "val/r@1" in report["last_val"] and "val/p2q_r@1" in report["last_val"]
    p2q = report["test"]["p2q"]             # Table 10's direction: paragraphs -> questions
    assert p2q["pairs"] == 5 and p2q["any"]["paragraphs"] == 2 and 0 <= p2q["r@1"] <= 100


def test_paragraph_and_both_sides_train_with_their_anchors(data_dir, tmp_path, capsys):
    over = _overrides(data_dir, tmp_path / "runs", "fcrr")
    assert main(["train", *over, "model.sides=both", "trainer.monitor=val/p2q_r@1"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["model"]["sides"] == "both" and report["monitor"] == "val/p2q_r@1"
    assert report["best_val_score"] is not None and "p2q" in report["test"]


def test_triplet_anchor_follows_the_refined_side():
    torch.manual_seed(0)
    q, p = torch.randn(6, 8), torch.randn(6, 8)
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    from retrieval_qa.losses.triplet import batch_hard_triplet_loss

    def loss(**kw):
        m = from_conf("model", "residual", dim=8, **kw).eval()
        with torch.no_grad():
            rq, rp = m.refine_questions(q), m.refine_paragraphs(p)
            return m.compute_loss(q, p, labels), rq, rp

    got, rq, rp = loss(sides="question")
    assert torch.allclose(got, batch_hard_triplet_loss(rq, rp, labels, labels, **TRIPLET))
    got, rq, rp = loss(sides="paragraph")
    assert torch.allclose(got, batch_hard_triplet_loss(rp, rq, labels, labels, **TRIPLET))
    got, rq, rp = loss(sides="both")
    assert torch.allclose(got, 0.5 * (
        batch_hard_triplet_loss(rq, rp, labels, labels, **TRIPLET)
        + batch_hard_triplet_loss(rp, rq, labels, labels, **TRIPLET)))
    m = from_conf("model", "residual", dim=8, sides="both").train()
    torch.manual_seed(1)
    m.compute_loss(q, p, labels).backward()
    # the question refiner gets the question-anchored term's gradient only (targets detached)
    grads = [x.grad.clone() for x in m.question_refiner.parameters()]
    m.zero_grad()
    torch.manual_seed(1)
    rq, rp = m.refine_questions(q), m.refine_paragraphs(p)
    (0.5 * batch_hard_triplet_loss(rq, rp.detach(), labels, labels, **TRIPLET)).backward()
    for g, x in zip(grads, m.question_refiner.parameters(), strict=True):
        assert torch.allclose(g, x.grad, atol=1e-6)
    got, rq, rp = loss(sides="paragraph", anchor="question")
    assert torch.allclose(got, batch_hard_triplet_loss(rq, rp, labels, labels, **TRIPLET))
    with pytest.raises(ValueError, match="model.anchor"):
        from_conf("model", "residual", dim=8, anchor="answer")


def test_compose_uses_the_paper_settings():
    """``refiner: convrr`` and its settings beside it compose to the refiner's block (its
    ``_target_`` and the arguments it takes), ``loss.name`` to the loss's."""
    cfg = compose(["experiment=convrr"])
    assert cfg.model._target_.endswith("ResidualRefinementModule")
    refiner = OmegaConf.to_container(cfg.model.refiner)
    assert refiner == {"_target_": "retrieval_qa.encoders.residual.ConvRR", "sf": 1.0,
                       "dropout": 0.1, "conv_filters": 1024, "conv_window": 5, "conv_stride": 2}
    assert not {"sf", "dropout", "fc_hidden", "conv_filters"} & set(cfg.model)
    assert OmegaConf.to_container(cfg.model.loss) == {
        "_target_": "retrieval_qa.losses.triplet.BatchHardTripletLoss", "margin": 0.2,
        "squared": False}
    assert cfg.data.batch_size == 512
    assert cfg.model.optimizer.lr == 1e-3 and cfg.model.optimizer.weight_decay == 1e-3
    quadratic = compose(["experiment=fcrr", "model.loss.name=quadratic_conditional",
                         "model.fc_hidden=16"]).model
    assert quadratic.loss._target_.endswith("QuadraticConditionalLoss")
    assert quadratic.refiner.fc_hidden == 16 and "conv_filters" not in quadratic.refiner


def test_exports_and_checkpoints_of_earlier_versions_load(tmp_path):
    """Their settings name the refiner and the loss by short name beside the refiner's
    settings; they build the same module."""
    from retrieval_qa.models.residual import ResidualRefinementModule, composed_settings

    old = {"dim": 8, "refiner": "fcrr_convrr", "sides": "both", "sf": 1.0, "dropout": 0.1,
           "fc_hidden": None, "conv_filters": 8, "conv_window": 5, "conv_stride": 2,
           "loss": {"name": "quadratic_conditional", "margin": 0.2, "squared": False},
           "optimizer": {"lr": 1e-3, "weight_decay": 1e-3}, "test_ap": True, "anchor": "auto"}
    torch.manual_seed(0)
    module = ResidualRefinementModule(**composed_settings(old))
    assert type(module.question_refiner).__name__ == "FCRRConvRR"
    assert type(module.loss).__name__ == "QuadraticConditionalLoss"
    path = tmp_path / "old.ckpt"
    torch.save({"hyper_parameters": old, "state_dict": module.state_dict()}, path)
    again = ResidualRefinementModule.from_checkpoint(path)
    assert all(torch.equal(a, b) for a, b in zip(module.state_dict().values(),
                                                 again.state_dict().values(), strict=True))


def test_evaluate_static_on_paragraphs_and_reqa(data_dir, tmp_path, capsys):
    args = ["evaluate", "--model", "static:tiny", "--dataset", "squad_paragraphs", "--pool",
            "dev", "--data-dir", str(data_dir), "--quiet"]
    # static:tiny is not a registered choice; the evaluator itself is what is tested here
    from retrieval_qa.embeddings.evaluate import evaluate_paragraph_task

    out = evaluate_paragraph_task("static:tiny", True, "dev", data_dir,
                                  pr_curve=str(tmp_path / "pr.png"))
    assert out["metrics"]["questions"] == 5 and 0 <= out["metrics"]["ap"] <= 1
    assert (tmp_path / "pr.png").is_file() and out["idf_corpus"] == "paragraphs"
    args[2] = "static:glove50"   # a registered name, served by the tiny vectors
    assert main(args + ["--idf"]) == 0
    cli = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert cli["metrics"]["questions"] == 5 and cli["idf"] is True
    assert main(["evaluate", "--model", "static:glove50", "--dataset", "reqa_squad", "--pool",
                 "dev", "--data-dir", str(data_dir), "--quiet"]) == 0
    reqa = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert reqa["dataset"] == "reqa_squad" and "mrr" in reqa["metrics"]


def test_evaluate_reqa_through_a_trained_refiner(data_dir, tmp_path, capsys):
    assert main(["train", *_overrides(data_dir, tmp_path / "runs", "fcrr")]) == 0
    folder = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["checkpoint"]
    args = ["evaluate", "--model", "static:glove50", "--idf", "--dataset", "reqa_squad",
            "--pool", "dev", "--data-dir", str(data_dir), "--quiet", "--no-cache"]

    def run(*extra):
        assert main(args + list(extra)) == 0
        return json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    plain, refined = run("--run-file", str(tmp_path / "plain.jsonl")), run("--refiner", folder)
    assert plain["refiner"] is None
    assert refined["refiner"]["sides"] == "question" and refined["refiner"]["folder"] == folder
    assert refined["questions"] == plain["questions"] and "mrr" in refined["metrics"]
    # a refiner whose branch outputs 0 is the identity (then l2-normalised): plain metrics
    state = torch.load(f"{folder}/refiners.pt")
    last = max(k for k in state if k.startswith("question_refiner.") and k.endswith(".weight"))
    state[last].zero_()
    state[last.replace(".weight", ".bias")].zero_()
    identity = tmp_path / "identity"
    identity.mkdir()
    torch.save(state, identity / "refiners.pt")
    (identity / "model.json").write_text(open(f"{folder}/model.json").read())
    run("--refiner", str(identity), "--run-file", str(tmp_path / "identity.jsonl"))
    # the same scores up to float rounding (the unit vectors are normalised once more): the
    # same questions, each one's sorted scores (all 5 candidates) within 1e-5 (the run file
    # keeps 6 decimals); the ranks may differ where two scores are that close, so the
    # metrics are not compared by ==
    base_run = read_run_file(tmp_path / "plain.jsonl")
    identity_run = read_run_file(tmp_path / "identity.jsonl")
    assert [r["question"] for r in identity_run] == [r["question"] for r in base_run]
    for a, b in zip(identity_run, base_run, strict=True):
        assert len(a["top_scores"]) == 5
        assert a["top_scores"] == pytest.approx(b["top_scores"], abs=1e-5)
    assert main([a for a in args if a != "--idf"] + ["--refiner", folder]) != 0
    assert "pass --model static:glove50 --idf" in capsys.readouterr().err


def test_single_paragraph_batch_is_skipped_not_an_error():
    m = from_conf("model", "residual", dim=8)
    batch = (torch.randn(4, 8), torch.randn(4, 8), torch.zeros(4, dtype=torch.long))
    assert m.training_step(batch, 0) is None


def test_datamodule_holds_out_validation_questions():
    split = VectorSplit(torch.randn(30, 4), torch.randn(5, 4), torch.arange(30) % 5)
    dm = ParagraphVectorDataModule(split, split, val_questions=6, batch_size=4,
                                   eval_batch_size=8, max_train_pairs=None, seed=1)
    assert set(dm.val_index.tolist()).isdisjoint(dm.train_index.tolist())
    assert len(dm.train_index) == 24 and len(next(iter(dm.train_dataloader()))) == 3
    with pytest.raises(ValueError, match="val_questions"):
        ParagraphVectorDataModule(split, None, val_questions=30, batch_size=4,
                                  eval_batch_size=8, max_train_pairs=None, seed=0)


def test_stopped_mid_epoch_2_resumes_to_the_weights_of_an_uninterrupted_run(
        data_dir, tmp_path, capsys, monkeypatch):
    """SIGTERM at step 6 (of 4 steps an epoch), then the same command: the shuffled vector
    loader resumes at its position in epoch 2's order and dropout draws the same masks, so
    the weights are those of the uninterrupted run, bitwise (the same command on the same
    machine)."""
    with monkeypatch.context() as m:
        straight = final_weights(m)
        assert main(["train", *_overrides(data_dir, tmp_path / "a", "fcrr")]) == 0
    over = _overrides(data_dir, tmp_path / "b", "fcrr")
    with monkeypatch.context() as m:
        signal_at_step(m, 6, signal.SIGTERM)
        assert main(["train", *over]) == 128 + signal.SIGTERM
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["global_step"] == 6
    with monkeypatch.context() as m:
        resumed = final_weights(m)
        assert main(["train", *over]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["resumed_from"] and report["global_steps"] == 8
    assert straight.keys() == resumed.keys()
    for k in straight:
        assert torch.equal(straight[k], resumed[k]), k
