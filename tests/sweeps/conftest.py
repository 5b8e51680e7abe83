"""Fixtures of the sweep tests: the training tests' synthetic data dir."""

from __future__ import annotations

import pytest
from helpers import TINY_SQUAD, make_dirs


@pytest.fixture(scope="module")
def setup_dirs(tmp_path_factory):
    return make_dirs(tmp_path_factory.mktemp("sweeps"), TINY_SQUAD)
