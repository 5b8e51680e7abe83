"""KL cost annealing (Cross-VAEs 4.3): beta grows by 2/epochs per epoch up to 1."""

from __future__ import annotations

import pytest

from retrieval_qa.models.vae_schedule import KLAnnealing

PAPER = {"rate_factor": 2.0, "max_beta": 1.0, "start": 0.0}  # 4.3, as conf/model/vae.yaml


def annealing(epochs: float, **settings) -> KLAnnealing:
    return KLAnnealing(epochs, **{**PAPER, **settings})


def test_the_paper_settings_are_the_conf_files():
    from retrieval_qa.registry import config_values
    from retrieval_qa.training.compose import load_group

    kl = config_values(load_group("model", "vae").loss.kl)
    assert {k: kl[k] for k in PAPER} == PAPER and kl["epochs"] is None  # the run's epochs


def test_paper_schedule_over_100_epochs():
    beta = annealing(100)
    assert beta.rate == pytest.approx(0.02) and beta.saturation_epoch == pytest.approx(50)
    expected = {0: 0.0, 1: 0.02, 10: 0.2, 25: 0.5, 49: 0.98, 50: 1.0, 51: 1.0, 99: 1.0, 150: 1.0}
    for epoch, value in expected.items():
        assert beta(epoch) == pytest.approx(value), epoch


def test_fractional_epochs_of_a_one_epoch_run():
    beta = annealing(1)
    assert [beta(e) for e in (0.0, 0.1, 0.25, 0.5, 0.75)] == pytest.approx([0, 0.2, 0.5, 1, 1])
    assert beta(-3) == 0.0


def test_other_settings_and_errors():
    assert annealing(10, rate_factor=1.0, max_beta=0.5)(20) == 0.5
    assert annealing(10, start=0.1)(0) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="epochs"):
        annealing(0)
    with pytest.raises(ValueError, match="start"):
        annealing(10, start=2.0)
    with pytest.raises(ValueError, match="NaN"):
        annealing(10)(float("nan"))
