"""Fixtures of the training tests: a synthetic SQuAD-format data dir and a word tokenizer."""

from __future__ import annotations

import pytest
from helpers import TINY_SQUAD, make_dirs


@pytest.fixture(scope="module")
def setup_dirs(tmp_path_factory):
    return make_dirs(tmp_path_factory.mktemp("train"), TINY_SQUAD)
