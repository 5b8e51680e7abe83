"""ENDX loss-weight schedules (paper section 4.4) and eq. 13 weights."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from retrieval_qa.losses.gam import RELATION_NAMES, RELATIONS
from retrieval_qa.models.endx import gam_schedule
from retrieval_qa.models.endx_schedule import (
    EndxLossWeights,
    GamWeightSchedule,
    LinearRamp,
)
from retrieval_qa.training.compose import load_group

#: conf/model/endx.yaml: the paper's settings (section 4.4), their one source
ENDX = OmegaConf.to_container(load_group("model", "endx"))
PAPER_FINAL = {"q|q": 1e4, "a|a": 1e4, "a|q": 0.5, "q|a": 0.5}


@pytest.mark.parametrize(
    ("epoch", "expected"), [(0, 0.0), (2.5, 0.25), (5, 0.5), (10, 0.5), (-1, 0.0), (1.0, 0.1)]
)
def test_linear_ramp(epoch: float, expected: float) -> None:
    assert LinearRamp(0.0, 0.5, 5)(epoch) == pytest.approx(expected)


def test_linear_ramp_edge_cases() -> None:
    assert LinearRamp(0.0, 3.0, 0)(0) == 3.0  # no ramp
    assert LinearRamp(1.0, 0.0, 4)(1) == pytest.approx(0.75)  # decreasing ramp
    with pytest.raises(ValueError):
        LinearRamp(0.0, 1.0, -1)


@pytest.mark.parametrize(
    ("epoch", "cross", "self_"), [(0, 0.0, 0.0), (2.5, 0.25, 5e3), (5, 0.5, 1e4), (10, 0.5, 1e4)]
)
def test_paper_gam_schedule(epoch: float, cross: float, self_: float) -> None:
    w = gam_schedule(ENDX["gam"])(epoch)
    assert set(w) == {"q|q", "a|a", "a|q", "q|a"}
    assert w["a|q"] == pytest.approx(cross) and w["q|a"] == pytest.approx(cross)
    assert w["q|q"] == pytest.approx(self_) and w["a|a"] == pytest.approx(self_)


def test_gam_schedule_from_config() -> None:
    cfg = OmegaConf.create(
        {
            "ramp_epochs": 2,
            "final": {**PAPER_FINAL, "q|q": 10.0},
            "ramps": {"a|q": {"start": 1.0, "end": 3.0, "ramp_epochs": 4}},
        }
    )
    sched = GamWeightSchedule.from_config(cfg)
    w1 = sched.weights(1)
    assert w1["q|q"] == pytest.approx(5.0)
    assert w1["a|a"] == pytest.approx(1e4 / 2)
    assert w1["q|a"] == pytest.approx(0.25)
    assert w1["a|q"] == pytest.approx(1.5)
    assert sched.weights(10) == pytest.approx({"q|q": 10.0, "a|a": 1e4, "a|q": 3.0, "q|a": 0.5})
    with pytest.raises(KeyError):
        GamWeightSchedule.from_config({"ramp_epochs": 2, "final": {**PAPER_FINAL, "q|x": 1.0}})
    with pytest.raises(KeyError):
        GamWeightSchedule.from_config({"rampepochs": 3})
    with pytest.raises(KeyError, match="final has no 'a\\|a'"):  # nothing is filled in
        GamWeightSchedule.from_config({"ramp_epochs": 2, "final": {"q|q": 1.0}})


def test_endx_loss_weights() -> None:
    w = EndxLossWeights.from_config(ENDX["weights"])
    assert (w.dual, w.cross, w.ga) == (0.25, 0.25, 0.5)  # the paper's, eq. 13
    assert w.total(1.0, 2.0, 4.0) == pytest.approx(0.25 + 0.5 + 2.0)
    given = OmegaConf.create({**ENDX["weights"], "ga": 1.0})
    assert EndxLossWeights.from_config(given).ga == 1.0
    with pytest.raises(KeyError):
        EndxLossWeights.from_config({**ENDX["weights"], "gam": 1.0})
    with pytest.raises(KeyError, match="model.weights has no 'dual'"):
        EndxLossWeights.from_config({"cross": 0.25, "ga": 0.5})


def test_the_conf_file_holds_the_papers_settings() -> None:
    """The schedules keep no copy of the paper's values: conf/model/endx.yaml holds them."""
    assert ENDX["weights"] == {"dual": 0.25, "cross": 0.25, "ga": 0.5}
    assert ENDX["gam"]["ramp_epochs"] == 5
    assert {RELATION_NAMES[k]: v for k, v in ENDX["gam"]["final"].items()} == PAPER_FINAL
    assert list(gam_schedule(ENDX["gam"])(0)) == list(RELATIONS)


def test_relation_names_and_sides() -> None:
    assert RELATIONS == {"q|q": ("q", "q"), "a|a": ("a", "a"), "a|q": ("a", "q"),
                         "q|a": ("q", "a")}
    assert list(RELATION_NAMES.values()) == list(RELATIONS)
