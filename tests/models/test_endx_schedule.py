"""ENDX loss-weight schedules (paper section 4.4) and eq. 13 weights."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from retrieval_qa.config import model_defaults
from retrieval_qa.losses.gam import RELATION_NAMES, RELATIONS
from retrieval_qa.models.endx_schedule import (
    EndxLossWeights,
    GamWeightSchedule,
    LinearRamp,
    paper_settings,
)


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
    w = GamWeightSchedule.paper()(epoch)
    assert set(w) == {"q|q", "a|a", "a|q", "q|a"}
    assert w["a|q"] == pytest.approx(cross) and w["q|a"] == pytest.approx(cross)
    assert w["q|q"] == pytest.approx(self_) and w["a|a"] == pytest.approx(self_)


def test_gam_schedule_from_config() -> None:
    cfg = OmegaConf.create(
        {
            "ramp_epochs": 2,
            "final": {"q|q": 10.0},
            "ramps": {"a|q": {"start": 1.0, "end": 3.0, "ramp_epochs": 4}},
        }
    )
    sched = GamWeightSchedule.from_config(cfg)
    w1 = sched.weights(1)
    assert w1["q|q"] == pytest.approx(5.0)
    assert w1["a|a"] == pytest.approx(paper_settings()["final"]["a|a"] / 2)
    assert w1["q|a"] == pytest.approx(0.25)
    assert w1["a|q"] == pytest.approx(1.5)
    assert sched.weights(10) == pytest.approx({"q|q": 10.0, "a|a": 1e4, "a|q": 3.0, "q|a": 0.5})
    with pytest.raises(KeyError):
        GamWeightSchedule.from_config({"final": {"q|x": 1.0}})
    with pytest.raises(KeyError):
        GamWeightSchedule.from_config({"rampepochs": 3})


def test_endx_loss_weights() -> None:
    w = EndxLossWeights.paper()
    assert (w.dual, w.cross, w.ga) == (0.25, 0.25, 0.5)
    assert w.total(1.0, 2.0, 4.0) == pytest.approx(0.25 + 0.5 + 2.0)
    assert EndxLossWeights.from_config(OmegaConf.create({"ga": 1.0})).ga == 1.0
    with pytest.raises(KeyError):
        EndxLossWeights.from_config({"gam": 1.0})
    assert EndxLossWeights.from_config({"ga": 1.0}).dual == 0.25  # the rest: the paper's


def test_paper_settings_are_read_from_the_endx_conf_file() -> None:
    """The schedules keep no copy of the paper's values: conf/model/endx.yaml is read."""
    endx = model_defaults("endx")
    paper = paper_settings()
    assert paper["weights"] == endx["weights"]
    assert paper["ramp_epochs"] == endx["gam"]["ramp_epochs"]
    assert paper["final"] == {RELATION_NAMES[k]: v for k, v in endx["gam"]["final"].items()}
    assert list(paper["final"]) == list(RELATIONS)


def test_relation_names_and_sides() -> None:
    assert RELATIONS == {"q|q": ("q", "q"), "a|a": ("a", "a"), "a|q": ("a", "q"),
                         "q|a": ("q", "a")}
    assert list(RELATION_NAMES.values()) == list(RELATIONS)
