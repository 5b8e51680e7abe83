"""The supervised-mining classifier: its input with segment ids, its examples' DataModule, and
`rqa train experiment=mining_classifier` end to end on a tiny random BERT (export, reload,
.ckpt, the Table 2 metrics and baselines)."""

from __future__ import annotations

import io
import json

import pytest
import torch
from transformers import BertTokenizerFast

from retrieval_qa.mining.classifier import MiningClassifier, load_classifier
from retrieval_qa.mining.classifier_data import MiningClassifierData, best_threshold
from retrieval_qa.mining.examples import ExampleCollator, encode_triples, read_examples
from retrieval_qa.mining.scorer import ClassifierScorer, PairScorer

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tok(mining_dirs):
    return BertTokenizerFast.from_pretrained(mining_dirs["bert"])


def test_segments_question_answer_context(tok):
    enc = encode_triples(tok, ["what is fact 1 ?"], ["fact 1 is about the city ."],
                         ["the city number 1 ."], max_length=64, max_question_length=16)
    ids = enc["input_ids"][0].tolist()
    words = tok.convert_ids_to_tokens(ids)
    assert words == ["[CLS]", "what", "is", "fact", "1", "?", "[SEP]", "fact", "1", "is",
                     "about", "the", "city", ".", "[SEP]", "the", "city", "number", "1", ".",
                     "[SEP]"]
    assert enc["token_type_ids"][0].tolist() == [0] * 7 + [1] * 8 + [2] * 6
    assert enc["attention_mask"][0].tolist() == [1] * 21
    plain = encode_triples(tok, ["what is fact 1 ?"], ["fact 1 ."], None, 64, 16)
    assert tok.convert_ids_to_tokens(plain["input_ids"][0].tolist())[-1] == "[SEP]"
    assert plain["token_type_ids"][0].tolist() == [0] * 7 + [1] * 4


def test_question_capped_then_context_cut_first(tok):
    long_q = " ".join(["what"] * 30)
    enc = encode_triples(tok, [long_q, "what ?"], ["fact 1 is about the city .", "fact ."],
                         ["the city " * 20, "the city ."], max_length=24, max_question_length=8,
                         context_segment=1)
    assert enc["input_ids"].shape == (2, 24)
    first = tok.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    assert first[:10] == ["[CLS]"] + ["what"] * 8 + ["[SEP]"]
    assert first[10:18] == ["fact", "1", "is", "about", "the", "city", ".", "[SEP]"]  # answer whole
    assert first[-1] == "[SEP]" and set(enc["token_type_ids"][0].tolist()) == {0, 1}
    second = enc["attention_mask"][1].tolist()
    assert sum(second) == 1 + 2 + 1 + 2 + 1 + 3 + 1 and second[-1] == 0  # padded


def test_a_third_segment_starts_as_a_copy_of_the_second(mining_dirs):
    model = MiningClassifier(pretrained=str(mining_dirs["bert"]), fallback=None, dropout=0.0,
                             max_length=64, max_question_length=16, with_context=True,
                             context_segment=2, score_batch_size=4,
                             optimizer={"name": "adamw", "lr": 1e-3, "weight_decay": 0.0,
                                        "schedule": "constant"}, pretrained_label=None)
    emb = model.encoder.embeddings.token_type_embeddings.weight
    assert emb.shape[0] == 3 and model.encoder.config.type_vocab_size == 3
    torch.testing.assert_close(emb[2], emb[1])
    assert isinstance(ClassifierScorer(model), PairScorer)


def test_best_threshold_maximises_accuracy():
    scores = torch.tensor([0.9, 0.8, 0.7, 0.3, 0.2])
    labels = torch.tensor([1, 1, 0, 1, 0])
    t = best_threshold(scores, labels)
    assert 0.7 < t <= 0.8 or 0.2 < t <= 0.3  # 4 of 5 correct either way
    assert ((scores >= t).long() == labels).sum() == 4


def _data_settings(*overrides: str) -> dict:
    """``data`` of the composed mining_classifier experiment (conf is the one source)."""
    from omegaconf import OmegaConf

    from retrieval_qa.training.compose import compose

    cfg = compose(["experiment=mining_classifier", *overrides])
    settings = OmegaConf.to_container(cfg.data, resolve=True)
    assert settings.pop("_target_") == "retrieval_qa.mining.classifier_data.MiningClassifierData"
    return settings


def test_the_data_module_takes_every_setting_from_conf(tmp_path):
    """No second default: each key of conf/data/mining_classifier.yaml is a required argument,
    and the composed values (batch 256, eval batch 512, the run's examples folder and seed)
    are the ones the module holds."""
    import inspect

    params = inspect.signature(MiningClassifierData).parameters
    settings = _data_settings(f"output_dir={tmp_path}", "seed=7")
    assert set(settings) <= set(params)
    assert all(params[k].default is inspect.Parameter.empty for k in settings)
    with pytest.raises(TypeError, match="batch_size"):
        MiningClassifierData(None, **{k: v for k, v in settings.items() if k != "batch_size"})
    data = MiningClassifierData(None, **settings)
    assert (data.batch_size, data.eval_batch_size, data.seed) == (256, 512, 7)
    assert data.examples_dir == tmp_path / "mining_classifier" / "examples"


def test_examples_are_built_once_and_reused(mining_dirs, tok, tmp_path, monkeypatch):
    def data():
        return MiningClassifierData(ExampleCollator(tok, 64, 16), **_data_settings(
            f"data.data_dir={mining_dirs['data']}",
            f"data.dense_retriever={mining_dirs['retriever']}", f"data.examples_dir={tmp_path}",
            "data.batch_size=8", "data.eval_batch_size=16", "data.seed=3"))

    first = data()
    first.setup()
    folder = tmp_path / next(p.name for p in tmp_path.iterdir())
    assert {p.name for p in folder.iterdir()} >= {"train.jsonl", "dev.jsonl", "test.jsonl",
                                                  "meta.json", "encodings-train"}
    info = first.describe()
    splits = info["splits"]
    assert splits["dev"]["questions"] > 0 and splits["test"]["examples"] > 0
    by_source = splits["train"]["by_source"]
    assert by_source["bm25"] == by_source["dense"] == by_source["same_document"]
    dev_q = {e.question_id for e in first.examples["dev"]}
    assert dev_q.isdisjoint(e.question_id for e in first.examples["train"])
    assert "REBUILT" in info["pools"]["train"]["source"] and info["pools"]["train"]["rebuilt"]
    base = info["test"]["baselines"]
    assert base["majority"]["acc"] == pytest.approx(
        100 * (1 - splits["test"]["positive_share"]), abs=0.01)
    assert {"acc", "auc_pr", "threshold"} <= set(base["dual_encoder"])
    batch = next(iter(first.train_dataloader()))
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "labels",
                          "dense_score"}

    import retrieval_qa.models.artifact as artifact

    monkeypatch.setattr(artifact, "load_artifact", lambda *a, **k: pytest.fail("rebuilt"))
    second = data()
    second.setup()
    assert second.examples == first.examples
    assert read_examples(folder / "dev.jsonl") == first.examples["dev"]



def test_damaged_examples_are_built_again_with_a_warning(mining_dirs, tok, tmp_path, caplog):
    import logging

    def data():
        return MiningClassifierData(ExampleCollator(tok, 64, 16), **_data_settings(
            f"data.data_dir={mining_dirs['data']}",
            f"data.dense_retriever={mining_dirs['retriever']}", f"data.examples_dir={tmp_path}",
            "data.batch_size=8", "data.eval_batch_size=16", "data.seed=3"))

    first = data()
    first.setup()
    (folder,) = tmp_path.iterdir()
    assert json.loads((folder / "meta.json").read_text())["examples"] == {
        s: len(first.examples[s]) for s in ("train", "dev", "test")}

    def older(path):  # the meta.json of the first layout: no counts of examples
        meta = json.loads(path.read_text())
        del meta["examples"]
        path.write_text(json.dumps(meta))

    damages = {"line_lost": lambda p: p.write_text("".join(p.read_text().splitlines(True)[:-1])),
               "cut_mid_line": lambda p: p.write_bytes(p.read_bytes()[:-20]),
               "empty": lambda p: p.write_bytes(b""),
               "garbage": lambda p: p.write_bytes(bytes(range(256)) * 4)}
    cases = [(n, h) for n in ("train.jsonl", "dev.jsonl", "test.jsonl") for h in damages]
    cases += [("meta.json", h) for h in ("cut_mid_line", "empty", "garbage")]
    cases += [("meta.json", "older_format")]
    for name, how in cases:
        (older if how == "older_format" else damages[how])(folder / name)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            again = data()
            again.setup()
        warnings = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
        assert len(warnings) == 1, (name, how, warnings)
        assert warnings[0].startswith(f"damaged cache {folder / name} ("), (name, how)
        assert again.examples == first.examples, (name, how)  # rebuilt: the same examples

def _overrides(mining_dirs, out, *extra):
    return ["experiment=mining_classifier", "profile=cpu",
            f"model.pretrained={mining_dirs['bert']}", "model.fallback=null",
            "model.max_length=48", "model.max_question_length=12",
            "model.optimizer.lr=1e-3", f"data.data_dir={mining_dirs['data']}",
            f"data.dense_retriever={mining_dirs['retriever']}", "data.max_train_documents=null",
            "data.max_test_documents=null", "data.batch_size=8", "data.eval_batch_size=32",
            f"output_dir={out}", "logger.name=none", "trainer.enable_progress_bar=false",
            "trainer.max_epochs=2", "threads=1", *extra]


def test_rqa_train_mining_classifier_end_to_end(mining_dirs, tmp_path):
    from retrieval_qa.cli import main

    out = io.StringIO()
    assert main(["train", *_overrides(mining_dirs, tmp_path)], stdout=out) == 0
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    test = report["test"]
    assert set(test["metrics"]) == {"acc", "auc_pr"} and test["examples"] > 0
    assert {"majority", "dual_encoder"} <= set(test["baselines"])
    assert report["monitor"] == "val/auc_pr" and "val/auc_pr" in report["last_val"]
    assert "[SEP] context (segment 2)" in report["classifier_input"]
    assert report["data"]["pools"]["train"]["rebuilt"]
    model = load_classifier(report["checkpoint"])
    assert not model.training and model.pretrained_label.startswith("local directory")
    q, a, c = ["what is fact 1 of place 2 ?"] * 2, ["fact 1 .", "fact 3 ."], ["the city ."] * 2
    p = model.probabilities(q, a, c)
    assert p.shape == (2,) and ((p > 0) & (p < 1)).all()
    from_ckpt = load_classifier(report["best_training_checkpoint"])
    torch.testing.assert_close(from_ckpt.probabilities(q, a, c), p)
    scorer = ClassifierScorer.from_path(report["checkpoint"], batch_size=1)
    torch.testing.assert_close(scorer(q, a, c), p)
    assert scorer.describe()["with_context"] is True
