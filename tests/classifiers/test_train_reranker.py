"""The reranker's training on a tiny random BERT: its export and report, the run of the same
settings again (nothing more trained), other settings refused, and a training stopped by a
signal (inside an epoch, at an epoch's last step) resumed to the weights, losses and report of
the uninterrupted one.

Bitwise equality of the weights is the point: the runs are the same computation in the same
process and thread setting, so any difference is a different random stream or data order."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import torch
from helpers import (
    WORDS,
    save_tiny_bert_model,
    signal_at_step,
    synthetic_squad,
    word_tokenizer,
    write_json_gz,
)

from experiments.loss_parting import step_losses
from retrieval_qa.classifiers.reranker import CrossEncoderReranker
from retrieval_qa.classifiers.train_classifier import LossRecorder
from retrieval_qa.classifiers.train_reranker import finished_report, main, train_reranker
from retrieval_qa.config import load_yaml, plain
from retrieval_qa.errors import RunInterrupted, SettingsMismatchError

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB = list(dict.fromkeys([*WORDS, *map(str, range(200)), "?", ".", "fact", "form", "(", ")"]))
REPORTED = ("steps_planned", "steps_done", "first_loss", "last_loss", "loss_curve", "examples",
            "batch_size")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("reranker")
    write_json_gz(root / "squad" / "train-v1.1.json.gz", synthetic_squad(12))
    save_tiny_bert_model(root / "bert", word_tokenizer(VOCAB), hidden=16)
    return root


def settings(data, out, **more) -> dict:
    """conf/pipeline/training/reranker.yaml, shrunk: 20 questions, 2 epochs of batch 8."""
    cfg = plain(load_yaml("pipeline/training/reranker.yaml"))
    cfg.update(questions=20, epochs=2, max_minutes=None, output=str(out),
               model={"pretrained": str(data / "bert"), "fallback": None, "max_length": 48,
                      "dropout": 0.3, "optimizer": {"lr": 1e-3, "warmup_ratio": 0.1},
                      "training": {"batch_size": 8, "accelerator": "cpu"}})
    return {**cfg, **more}


def weights(folder) -> dict:
    return CrossEncoderReranker.load(folder).state_dict()


def assert_same_training(a: dict, b: dict) -> None:
    assert {k: a[k] for k in REPORTED} == {k: b[k] for k in REPORTED}
    wa, wb = weights(a["output"]), weights(b["output"])
    assert wa.keys() == wb.keys()
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k


@pytest.fixture(scope="module")
def straight(data, tmp_path_factory):
    """The uninterrupted training, on one thread as the tests' runs (a module fixture is made
    before the function-scoped ``one_thread`` applies: set here too, or the two runs would
    differ in thread count, which float32 sums do not survive bitwise)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return train_reranker(settings(data, tmp_path_factory.mktemp("straight") / "model"),
                              data, progress=False)
    finally:
        torch.set_num_threads(before)


def test_a_training_exports_and_the_same_settings_again_train_nothing_more(
        data, straight, tmp_path):
    assert straight["steps_done"] == straight["steps_planned"] > 2
    assert straight["resumed_from"] is None and straight["time_capped"] is False
    # 25-step means: under 25 steps here, so one, the mean of the last 25 (all) steps
    assert straight["loss_curve"] == {"every_steps": 25, "means": [straight["last_loss"]]}
    assert straight["machine"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    losses = step_losses(straight["output"])  # every step's, for experiments/loss_parting.py
    assert len(losses) == straight["steps_planned"] and round(losses[0], 4) == straight["first_loss"]
    checkpoints = Path(straight["output"]) / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["config.yaml", "last.ckpt"]
    again = train_reranker(settings(data, straight["output"]), data, progress=False)
    assert again["resumed_from"] == str(checkpoints / "last.ckpt")
    assert_same_training(straight, again)


def test_the_loss_curve_is_the_mean_of_each_stretch_of_steps():
    recorder = LossRecorder(5, every=0)
    recorder.losses = [1.0, 3.0, 2.0, 4.0, 5.0]
    assert recorder.curve(2) == {"every_steps": 2, "means": [2.0, 3.0, 5.0]}
    assert recorder.curve()["means"] == [3.0]


@pytest.mark.parametrize("where", ["inside an epoch", "at an epoch's last step"])
def test_a_training_stopped_by_a_signal_resumes_to_the_uninterrupted_weights(
        data, straight, tmp_path, monkeypatch, where):
    per_epoch = straight["steps_planned"] // 2
    step = 3 if where == "inside an epoch" else per_epoch
    cfg = settings(data, tmp_path / "model")
    with monkeypatch.context() as m:
        signal_at_step(m, step, signal.SIGTERM)
        with pytest.raises(RunInterrupted) as stopped:
            train_reranker(cfg, data, progress=False)
    assert stopped.value.global_step == step
    resumed = train_reranker(cfg, data, progress=False)
    assert resumed["resumed_from"] == str(tmp_path / "model" / "checkpoints" / "last.ckpt")
    assert_same_training(straight, resumed)


def test_a_training_stopped_by_its_time_cap_says_it_is_reduced(data, tmp_path, capsys):
    """max_minutes is a budget: when it binds, the report and stderr say how many steps ran."""
    report = train_reranker(settings(data, tmp_path / "model", max_minutes=1e-6), data,
                            progress=False)
    assert report["time_capped"] is True
    assert 1 <= report["steps_done"] < report["steps_planned"]
    err = capsys.readouterr().err
    assert (f"cap stopped the training after {report['steps_done']} of "
            f"{report['steps_planned']} steps, a reduced training") in err
    assert "max_minutes=null trains the rest" in err


def test_a_capped_training_goes_on_under_another_cap_to_the_uncapped_weights(
        data, straight, tmp_path):
    """A training its time cap stopped is finished for that cap only (the command reuses its
    report); without the cap it resumes from its last checkpoint and ends where the uncapped
    training does."""
    out = tmp_path / "model"
    capped = train_reranker(settings(data, out, max_minutes=1e-6), data, progress=False)
    assert capped["time_capped"] is True and capped["steps_done"] < capped["steps_planned"]
    (out / "training.json").write_text(json.dumps(capped, default=str))  # as the command does
    assert finished_report(settings(data, out, max_minutes=1e-6)) == json.loads(
        json.dumps(capped, default=str))
    assert finished_report(settings(data, out)) is None
    resumed = train_reranker(settings(data, out), data, progress=False)
    assert resumed["resumed_from"] == str(out / "checkpoints" / "last.ckpt")
    assert resumed["time_capped"] is False
    assert_same_training(straight, resumed)


def test_a_step_cap_stops_at_that_step_of_the_full_schedule_and_resumes_to_the_uncapped(
        data, straight, tmp_path, capsys):
    """stop_after_steps rebuilds a time-capped training from its report's steps_done: it stops
    after that step with the schedule of every planned step (so its weights are those of the
    uncapped run's first steps), says so, and goes on without the cap to the uncapped weights."""
    out = tmp_path / "model"
    capped = train_reranker(settings(data, out, stop_after_steps=2), data, progress=False)
    assert capped["step_capped"] is True and capped["time_capped"] is False
    assert capped["steps_done"] == 2 < capped["steps_planned"]
    assert capped["first_loss"] == straight["first_loss"]
    assert "the stop_after_steps=2 cap stopped the training after 2 of" in capsys.readouterr().err
    (out / "training.json").write_text(json.dumps(capped, default=str))
    assert finished_report(settings(data, out, stop_after_steps=2)) is not None
    assert finished_report(settings(data, out)) is None
    resumed = train_reranker(settings(data, out), data, progress=False)
    assert resumed["step_capped"] is False and resumed["steps_done"] == resumed["steps_planned"]
    assert_same_training(straight, resumed)


def overrides(data, out, *more) -> list[str]:
    """The command line of :func:`settings`."""
    return ["--data-dir", str(data), "questions=20", "epochs=2", "max_minutes=null",
            f"output={out}", f"model.pretrained={data / 'bert'}", "model.max_length=48",
            "model.training.batch_size=8", *more]


def test_other_settings_are_refused_and_resume_never_starts_over(data, tmp_path, capsys):
    out = tmp_path / "model"
    train_reranker(settings(data, out, epochs=1), data, progress=False)
    with pytest.raises(SettingsMismatchError, match=r"epochs: 1 -> 2.*resume=never"):
        train_reranker(settings(data, out), data, progress=False)
    capsys.readouterr()
    assert main(overrides(data, out)) == 2  # the command: one line naming the fix, status 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("train_reranker: error:") and "epochs: 1 -> 2" in line
    report = train_reranker(settings(data, out, resume="never"), data, progress=False)
    assert report["resumed_from"] is None and report["steps_done"] == report["steps_planned"]
    assert "resume=never: removed" in capsys.readouterr().err


def test_the_command_run_again_after_a_finished_training_keeps_its_export(data, tmp_path, capsys):
    """A finished folder of the same settings is reused as it is: its files keep their bytes
    (the distillation's teacher scores are keyed by them)."""
    out = tmp_path / "model"
    assert main(overrides(data, out)) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert main(overrides(data, out)) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1]) == first
    assert "nothing trained" in captured.err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == files
    assert main(overrides(data, out, "epochs=1")) == 2   # other settings: still refused


def test_the_command_prints_the_interrupted_run_and_exits_with_the_signal(
        data, tmp_path, monkeypatch, capsys):
    signal_at_step(monkeypatch, 2, signal.SIGTERM)
    assert main(overrides(data, tmp_path / "m")) == 128 + signal.SIGTERM
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["interrupted"] is True and out["global_step"] == 2
    assert out["checkpoint"] == str(tmp_path / "m" / "checkpoints" / "last.ckpt")


def test_the_listwise_config_has_the_default_files_keys_and_its_documented_override():
    """conf/pipeline/training/reranker_listwise.yaml (the pipelines' reranker, the distillation's
    teacher) is a whole settings file: reranker.yaml's keys, values within conf/ranges.yaml,
    and the first_stage block its header documents composes onto it."""
    from retrieval_qa.training.compose import compose_file

    path = "conf/pipeline/training/reranker_listwise.yaml"
    listwise = plain(compose_file(load_yaml("pipeline/training/reranker_listwise.yaml"), path, [
        "first_stage={_target_: retrieval_qa.distill.negatives.FirstStageNegatives, "
        "pipeline: hybrid_distill_rerank10, top_k: 20, folder: runs/x}"]))
    default = plain(load_yaml("pipeline/training/reranker.yaml"))
    assert set(listwise) == set(default) and set(listwise["model"]) == set(default["model"])
    assert (listwise["loss"], listwise["questions"], listwise["model"]["optimizer"]["lr"]) \
        == ("listwise", 6000, 1e-4)
    assert listwise["first_stage"]["pipeline"] == "hybrid_distill_rerank10"


def test_the_reader_config_is_the_listwise_one_reading_paragraphs_on_twice_the_questions():
    """conf/pipeline/training/reader_q12k.yaml (the pipeline aimed past 86's reranker) is a whole
    settings file that differs from reranker_listwise.yaml only where its header says: 12,000
    questions, no time cap, the paragraph read at 256 tokens, its own folder and seed."""
    from retrieval_qa.training.compose import compose_file

    path = "conf/pipeline/training/reader_q12k.yaml"
    reader = plain(compose_file(load_yaml("pipeline/training/reader_q12k.yaml"), path, []))
    listwise = plain(load_yaml("pipeline/training/reranker_listwise.yaml"))
    differ = {k for k in listwise if k != "model" and reader[k] != listwise[k]}
    assert differ == {"questions", "max_minutes", "output", "seed"}
    assert (reader["questions"], reader["max_minutes"]) == (12000, None)
    model = {k for k in listwise["model"] if reader["model"][k] != listwise["model"][k]}
    assert model == {"max_length", "reads"}
    assert (reader["model"]["reads"], reader["model"]["max_length"]) \
        == ("sentence_and_paragraph", 256)


def test_a_training_recorded_before_reads_existed_is_the_sentence_readers():
    from retrieval_qa.classifiers.train_reranker import _training_settings

    cfg = plain(load_yaml("pipeline/training/reranker_listwise.yaml"))
    assert cfg["model"]["reads"] == "sentence"
    recorded = {**cfg, "model": {k: v for k, v in cfg["model"].items() if k != "reads"}}
    assert _training_settings(recorded) == _training_settings(cfg)
    paragraph = {**cfg, "model": {**cfg["model"], "reads": "sentence_and_paragraph"}}
    assert _training_settings(paragraph) != _training_settings(cfg)
