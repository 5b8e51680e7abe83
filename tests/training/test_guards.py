"""A result is what was trained (issue 76): a run that trains no step (its batch larger than
its training pairs) and a run whose loss turns non-finite or stays far above its start are
refused with one line naming the setting to change, exit status 2, and write no report, so
they are never reported or reused (retrieval_qa/training/guards.py)."""

from __future__ import annotations

import json
import math
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers import signal_at_step, tiny, tiny_overrides

from retrieval_qa.cli import main
from retrieval_qa.errors import NonFiniteLossError, RunInterrupted
from retrieval_qa.models.base import RetrievalModule
from retrieval_qa.models.endx import EndxModule
from retrieval_qa.models.vae import VAEModule
from retrieval_qa.training.guards import DivergenceStop, TrainingDiverged
from retrieval_qa.training.run import train
from retrieval_qa.training.trainer import build_callbacks, trainer_config

# 64 pairs of batch 8: 2 epochs of 7 steps (tiny_overrides: max_epochs=2)
RUN = ("test_after_fit=false", "threads=1", "data.max_train_pairs=64")
RUN_DIR = Path("dual_gru") / "cpu-seed42"
LR = "model.optimizer.lr"


def _one_line_error(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("rqa:")]
    assert len(err) == 1, err
    return err[0]


# --- zero steps ----------------------------------------------------------------------------
# the empty loaders are the case under test: Lightning warns of them before the guard stops it
@pytest.mark.filterwarnings("ignore:Total length of .* across ranks is zero")
def test_a_batch_larger_than_the_training_pairs_is_an_error_never_a_result(
        setup_dirs, tmp_path, capsys):
    """Reported: "No training batches.", 0 steps, the untrained model tested, exit 0 and the
    report reused later. Now: exit 2, one line naming data.batch_size against the 6 pairs,
    no report; the same command again is refused again (nothing to reuse)."""
    command = ["train", *tiny_overrides(setup_dirs, tmp_path, *RUN, "data.max_train_pairs=6",
                                        "test_after_fit=true")]
    for _ in range(2):
        assert main(command) == 2
        line = _one_line_error(capsys)
        assert line.startswith("rqa: error: no training batch: data.batch_size=8 makes no full "
                               "batch of the 6 training pairs")
        assert "no result was written" in line and "data.batch_size of at most 6" in line
        assert not (tmp_path / RUN_DIR / "result.json").exists()


def test_the_report_of_a_run_that_trained_0_steps_is_not_reused(setup_dirs, tmp_path, capsys):
    """A result.json with 0 global steps (written before such runs were refused) is no
    result: the same command trains the run and replaces it."""
    cfg = tiny(setup_dirs, tmp_path, *RUN, "trainer.max_epochs=1")
    first = train(cfg)
    report = tmp_path / RUN_DIR / "result.json"
    report.write_text(json.dumps({**first, "global_steps": 0}))
    for path in (tmp_path / RUN_DIR / "checkpoints").glob("*.ckpt"):
        path.unlink()  # as that run left it: no checkpoint
    again = train(cfg)
    assert "reused" not in again and again["global_steps"] == first["global_steps"] > 0
    assert json.loads(report.read_text())["global_steps"] == first["global_steps"]
    assert "the report of a run that trained 0 steps, not a result" in capsys.readouterr().err


# --- divergence ----------------------------------------------------------------------------
def _loss_times(monkeypatch, factor: float, from_step: int) -> None:
    """The training loss (and its gradients) times ``factor`` from global step ``from_step``
    on: a loss that leaves its start and stays there, as at a learning rate of 1e6."""
    original = RetrievalModule.log_training

    def log_training(self, loss, logs, batch_idx, size):
        scale = factor if self.global_step >= from_step else 1.0
        return original(self, loss * scale, logs, batch_idx, size)

    monkeypatch.setattr(RetrievalModule, "log_training", log_training)


RULE = ("trainer.divergence_window=3", "trainer.divergence_patience=2")


def test_a_loss_that_stays_far_above_its_start_stops_the_run_naming_the_learning_rate(
        setup_dirs, tmp_path, capsys, monkeypatch):
    """Checks after batches 3, 6, 9 (windows of 3): the loss is 20x from step 4, so the
    checks at 6 and 9 are above 5x the first batch's loss and the run stops at step 9 (of
    14), exit 2, one line; no report, and the same command (resumed from the end of epoch
    1, step 7) stops again."""
    _loss_times(monkeypatch, 20.0, 4)
    command = ["train", *tiny_overrides(setup_dirs, tmp_path, *RUN, *RULE,
                                        "model.optimizer.lr=0.5")]
    for _ in range(2):
        assert main(command) == 2
        line = _one_line_error(capsys)
        assert line.startswith("rqa: error: training diverged at step 9: the training loss "
                               "(train/loss) stayed above 5 x its first batch's ")
        assert "2 checks in a row" in line and "trainer.divergence_patience=2" in line
        assert "model.optimizer.lr=0.5 now (e.g. model.optimizer.lr=0.05)" in line
        assert "resume=never or another output_dir" in line
        assert not (tmp_path / RUN_DIR / "result.json").exists()


def test_a_run_that_ends_above_the_limit_diverged_whatever_its_patience(
        setup_dirs, tmp_path, monkeypatch):
    _loss_times(monkeypatch, 20.0, 2)
    with pytest.raises(TrainingDiverged, match="at step 7: .* at its last check"):
        train(tiny(setup_dirs, tmp_path, *RUN, "trainer.divergence_window=3",
                   "trainer.divergence_patience=100", "trainer.max_epochs=1"))
    assert not (tmp_path / RUN_DIR / "result.json").exists()


def test_a_resumed_run_decides_as_the_uninterrupted_one(setup_dirs, tmp_path, monkeypatch):
    """Stopped by SIGTERM at step 5, inside the window of batches 4 to 6: the checkpoint
    holds the window's sum and count and the checks above in a row, so the resumed run
    stops at step 9 too (with the window restarted it would check at 8 and 11)."""
    _loss_times(monkeypatch, 20.0, 4)
    with pytest.raises(TrainingDiverged, match="at step 9:") as straight:
        train(tiny(setup_dirs, tmp_path / "a", *RUN, *RULE))
    with monkeypatch.context() as m:
        signal_at_step(m, 5, signal.SIGTERM)
        with pytest.raises(RunInterrupted):
            train(tiny(setup_dirs, tmp_path / "b", *RUN, *RULE))
    with pytest.raises(TrainingDiverged, match="at step 9:") as resumed:
        train(tiny(setup_dirs, tmp_path / "b", *RUN, *RULE))
    assert str(resumed.value) == str(straight.value)


def test_a_non_finite_loss_names_the_learning_rate(setup_dirs, tmp_path, monkeypatch):
    _loss_times(monkeypatch, float("nan"), 1)
    with pytest.raises(NonFiniteLossError, match=r"at global step 1 .*no result was written "
                                                 r"\(fix: a lower learning rate: "
                                                 r"model\.optimizer\.lr=0\.5 now"):
        train(tiny(setup_dirs, tmp_path, *RUN, "model.optimizer.lr=0.5"))
    assert not (tmp_path / RUN_DIR / "result.json").exists()


# --- the rule, by itself -------------------------------------------------------------------
def _trainer(step: int = 0, should_stop: bool = False):
    return SimpleNamespace(global_step=step, accumulate_grad_batches=1, optimizers=[],
                           should_stop=should_stop, state=SimpleNamespace(fn="fit"),
                           strategy=SimpleNamespace(broadcast=lambda value, src=0: value))


def _feed(stop: DivergenceStop, losses, module=None) -> None:
    module = module or SimpleNamespace(optimizer_cfg={"lr": 1e6})
    for step, value in enumerate(losses, 1):
        stop.on_train_batch_end(_trainer(step), module, {"loss": torch.tensor(value)}, None, 0)


def test_the_rule_compares_each_windows_mean_with_the_first_batchs_loss():
    stop = DivergenceStop(window=2, factor=5, patience=3, setting=LR)  # limit: 5 x 4 = 20
    _feed(stop, [4.0, 4.0, 30.0, 30.0, 30.0, 30.0, 1.0, 1.0])  # below, above twice, below
    assert (stop.reference, stop.streak, stop.last_mean) == (4.0, 0, 1.0)
    _feed(stop, [30.0, 30.0, 30.0, 30.0])
    assert stop.streak == 2
    with pytest.raises(TrainingDiverged, match="3 checks in a row.*model.optimizer.lr=1e\\+06"):
        _feed(stop, [30.0, 30.0])


def test_the_rule_spares_a_loss_that_rises_less_than_its_factor_and_a_non_positive_start():
    stop = DivergenceStop(window=2, factor=5, patience=1, setting=LR)
    _feed(stop, [4.0, 19.0, 19.0, 19.0])  # means 11.5 and 19, below 20
    assert stop.streak == 0
    negative = DivergenceStop(window=2, factor=5, patience=1, setting=LR)
    _feed(negative, [-1.0, 50.0, 50.0, 50.0])  # no positive reference: finiteness only
    assert negative.limit is None and negative.streak == 0
    with pytest.raises(TrainingDiverged, match="turned non-finite"):
        _feed(negative, [math.inf, 1.0])


def test_the_rule_reads_the_term_the_module_names():
    """ENDX's total grows by design as GAM's weights ramp up, the VAE's as its KL weight
    anneals up: their checks watch the dual loss and the reconstruction."""
    assert EndxModule.divergence_term == "train/dual_loss"
    assert VAEModule.divergence_term == "train/recon"
    assert RetrievalModule.divergence_term == "train/loss"
    stop = DivergenceStop(window=1, factor=5, patience=1, setting=LR)
    module = SimpleNamespace(optimizer_cfg={}, divergence_term="train/dual_loss",
                             divergence_loss=torch.tensor(2.0))
    for _ in range(3):  # the returned loss (1000) is not the one watched
        stop.on_train_batch_end(_trainer(), module, {"loss": torch.tensor(1000.0)}, None, 0)
    assert (stop.reference, stop.streak) == (2.0, 0)


def test_a_stopped_run_is_not_judged_at_its_end_and_the_state_round_trips():
    stop = DivergenceStop(window=2, factor=5, patience=3, setting=LR)
    _feed(stop, [4.0, 4.0, 30.0, 30.0, 30.0])
    stop.on_fit_end(_trainer(5, should_stop=True), SimpleNamespace())  # a budget stopped it
    state = stop.state_dict()
    assert state == {"reference": 4.0, "streak": 1, "count": 1, "sum": 30.0, "last_mean": 30.0}
    again = DivergenceStop(window=2, factor=5, patience=3, setting=LR)
    again.load_state_dict(state)
    assert again.state_dict() == state
    with pytest.raises(TrainingDiverged, match="at its last check"):
        again.on_fit_end(_trainer(5), SimpleNamespace(optimizer_cfg={}))


def test_the_trainings_of_rqa_train_watch_divergence_and_the_classifiers_do_not(tmp_path):
    stops = [c for c in build_callbacks(trainer_config("default"), tmp_path)
             if isinstance(c, DivergenceStop)]
    assert [(s.window, s.factor, s.patience, s.setting) for s in stops] == \
        [(10, 5.0, 3, "model.optimizer.lr")]
    classifier = trainer_config("classifier")
    assert not any(isinstance(c, DivergenceStop) for c in build_callbacks(classifier, tmp_path))
    with pytest.raises(ValueError, match="factor > 1"):
        DivergenceStop(window=10, factor=1, patience=3, setting=LR)
