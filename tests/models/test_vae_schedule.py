"""KL cost annealing (Cross-VAEs 4.3): beta grows by 2/epochs per epoch up to 1."""

from __future__ import annotations

import pytest

from retrieval_qa.models.vae_schedule import KLAnnealing


def test_paper_schedule_over_100_epochs():
    beta = KLAnnealing(epochs=100)
    assert beta.rate == pytest.approx(0.02) and beta.saturation_epoch == pytest.approx(50)
    expected = {0: 0.0, 1: 0.02, 10: 0.2, 25: 0.5, 49: 0.98, 50: 1.0, 51: 1.0, 99: 1.0, 150: 1.0}
    for epoch, value in expected.items():
        assert beta(epoch) == pytest.approx(value), epoch


def test_fractional_epochs_of_a_one_epoch_run():
    beta = KLAnnealing(epochs=1)
    assert [beta(e) for e in (0.0, 0.1, 0.25, 0.5, 0.75)] == pytest.approx([0, 0.2, 0.5, 1, 1])
    assert beta(-3) == 0.0


def test_other_settings_and_errors():
    assert KLAnnealing(epochs=10, rate_factor=1.0, max_beta=0.5)(20) == 0.5
    assert KLAnnealing(epochs=10, start=0.1)(0) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="epochs"):
        KLAnnealing(epochs=0)
    with pytest.raises(ValueError, match="start"):
        KLAnnealing(epochs=10, start=2.0)
    with pytest.raises(ValueError, match="NaN"):
        KLAnnealing(epochs=10)(float("nan"))
