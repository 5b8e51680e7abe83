"""The concatenated-pair classifier (BERTQA) as a LightningModule, on a tiny random BERT."""

from __future__ import annotations

import signal

import pytest
import torch
from helpers import WORDS, signal_at_step, synthetic_squad, write_json_gz
from omegaconf import OmegaConf
from torch.utils.data import DataLoader
from transformers import BertConfig, BertModel, BertTokenizerFast

from retrieval_qa.classifiers.pair_classifier import CrossAttentionClassifier
from retrieval_qa.classifiers.pair_data import ClassifierPairDataModule
from retrieval_qa.classifiers.train_classifier import train_cross_classifier
from retrieval_qa.config import conf_dir, model_defaults
from retrieval_qa.data import load_pool
from retrieval_qa.errors import RunInterrupted, SettingsMismatchError

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("classifier")
    write_json_gz(root / "squad" / "train-v1.1.json.gz", synthetic_squad(12))
    pool, _ = load_pool("reqa_squad", "train", root, use_cache=False)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *map(str, range(200)), "?",
             ".", "fact", "form", "(", ")"]
    tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
    BertModel(config).save_pretrained(root / "bert")
    tok.save_pretrained(root / "bert")
    return root, pool


def tiny(env, **more) -> dict:
    return {"pretrained": str(env[0] / "bert"), "fallback": None, "max_length": 48, **more}


def test_conf_file_names_the_class_and_holds_every_argument():
    path = conf_dir() / "model" / "cross_classifier.yaml"
    cfg = OmegaConf.load(path)
    assert list(cfg)[:2] == ["_target_", "name"] and cfg.name == "cross_classifier"
    assert cfg._target_ == "retrieval_qa.classifiers.pair_classifier.CrossAttentionClassifier"
    settings = CrossAttentionClassifier.settings()
    assert set(settings) == set(cfg) - {"_target_", "name"}
    # the BERTQA defaults of the ENDX study (formerly argparse defaults)
    assert (settings["training"]["steps"], settings["training"]["batch_size"]) == (300, 16)
    assert settings["optimizer"]["lr"] == 3e-5 and settings["max_length"] == 128


def test_settings_merge_sections_and_name_unknown_keys():
    s = CrossAttentionClassifier.settings({"optimizer": {"lr": 1e-3}, "dropout": 0.0})
    assert s["optimizer"]["lr"] == 1e-3
    assert s["optimizer"]["name"] == model_defaults("cross_classifier")["optimizer"]["name"]
    with pytest.raises(KeyError, match=r"'dropuot'.*allowed"):
        CrossAttentionClassifier.settings({"dropuot": 0.1})
    with pytest.raises(KeyError, match=r"'step'.*training.*allowed"):
        CrossAttentionClassifier.settings({"training": {"step": 3}})


def test_training_steps_fit_a_fixed_batch(env):
    """A few optimiser steps of the module's own training_step / configure_optimizers on
    one batch drive its loss down."""
    import pytorch_lightning as pl

    torch.manual_seed(0)
    model = CrossAttentionClassifier.from_config(tiny(env, dropout=0.0,
                                                      optimizer={"lr": 1e-2, "schedule": "constant"}))
    assert model.training and model.encoder.training
    data = ClassifierPairDataModule(env[1], model.tokenizer, batch_size=8, steps=1,
                                    max_length=48, seed=0, same_paragraph=0.5)
    batch = next(iter(data.train_dataloader()))

    def loss() -> float:
        with torch.no_grad():
            inputs = {k: v for k, v in batch.items() if k != "labels"}
            return model.loss_fn(model(**inputs), batch["labels"]).item()

    before = loss()
    trainer = pl.Trainer(max_steps=40, accelerator="cpu", logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(model, train_dataloaders=DataLoader([batch] * 40, batch_size=None))
    assert trainer.global_step == 40
    model.eval()
    assert loss() < 0.25 * before, (before, loss())
    assert model.predict_proba([], []).shape == (0,)


def test_train_on_a_pool_then_score_and_predict(env):
    model, info = train_cross_classifier(
        env[1], tiny(env, training={"steps": 4, "batch_size": 6}), seed=1, log_every=0)
    assert not model.training and info["steps"] == 4 and info["batch_size"] == 6
    assert info["first_loss"] > 0 and "equal chance" in info["negatives"]
    assert info["loss_curve"]["every_steps"] == 25 and len(info["loss_curve"]["means"]) == 1
    assert info["pretrained"] and info["pretrained_substituted"] is False
    pool = env[1]
    questions = [p.question for p in pool.pairs[:3]]
    candidates = [c.text for c in pool.candidates[:5]]
    one = model.score(questions[0], candidates)
    many = model.score(questions, candidates, batch_size=2)
    assert one.shape == (5,) and many.shape == (3, 5)
    torch.testing.assert_close(many[0], one)
    pairs = model.score_pairs(questions, candidates[:3])
    torch.testing.assert_close(pairs, torch.stack([many[i, i] for i in range(3)]))
    # taken in length order, one pair a batch or all at once: each score in its pair's place
    torch.testing.assert_close(model.score_pairs(questions, candidates[:3], batch_size=1),
                               pairs, rtol=1e-4, atol=1e-5)
    p = model.predict_proba(questions, candidates[:3])
    assert ((p > 0) & (p < 1)).all()
    torch.testing.assert_close(p, torch.sigmoid(pairs))
    with pytest.raises(ValueError, match="3 questions but 2"):
        model.score_pairs(questions, candidates[:2])


def test_the_same_seed_trains_the_same_model(env):
    a, _ = train_cross_classifier(env[1], tiny(env, training={"steps": 2, "batch_size": 4}),
                                  seed=5, log_every=0)
    b, _ = train_cross_classifier(env[1], tiny(env, training={"steps": 2, "batch_size": 4}),
                                  seed=5, log_every=0)
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y), name  # exact: the same computation twice in one process


def test_a_training_stopped_by_a_signal_resumes_to_the_uninterrupted_weights(
        env, tmp_path, monkeypatch):
    """With a folder, the training keeps its resumable checkpoints there: stopped by SIGTERM
    after step 3 of 6, the same call resumes to the weights and losses of an uninterrupted
    training (dropout on: the random-number states and the sampler's position are restored);
    called again when finished, it trains nothing more. Exact: the same computation in one
    process."""
    settings = tiny(env, dropout=0.3, training={"steps": 6, "batch_size": 4})
    straight, a = train_cross_classifier(env[1], settings, seed=2, log_every=0,
                                         run_dir=tmp_path / "a")
    with monkeypatch.context() as m:
        signal_at_step(m, 3, signal.SIGTERM)
        with pytest.raises(RunInterrupted):
            train_cross_classifier(env[1], settings, seed=2, log_every=0, run_dir=tmp_path / "b")
    resumed, b = train_cross_classifier(env[1], settings, seed=2, log_every=0,
                                        run_dir=tmp_path / "b")
    assert b["resumed_from"] == str(tmp_path / "b" / "checkpoints" / "last.ckpt")
    assert (a["first_loss"], a["last_loss"], a["loss_curve"]) == \
        (b["first_loss"], b["last_loss"], b["loss_curve"])
    for (name, x), y in zip(straight.state_dict().items(), resumed.state_dict().values(),
                            strict=True):
        assert torch.equal(x, y), name
    again, c = train_cross_classifier(env[1], settings, seed=2, log_every=0,
                                      run_dir=tmp_path / "a")
    assert c["resumed_from"] == str(tmp_path / "a" / "checkpoints" / "last.ckpt")
    assert all(torch.equal(x, y) for x, y in zip(straight.state_dict().values(),
                                                 again.state_dict().values(), strict=True))
    with pytest.raises(SettingsMismatchError, match=r"seed: 2 -> 3"):
        train_cross_classifier(env[1], settings, seed=3, log_every=0, run_dir=tmp_path / "a")
