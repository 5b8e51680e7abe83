"""Shared fixtures: tiny hand-written datasets, and the real data when it is present."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import TINY_SQUAD, write_json_gz

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    return Path(os.environ.get("RQA_DATA_DIR") or REPO.parent / "shared" / "data")


@pytest.fixture
def shared_data() -> Path:
    d = shared_data_dir()
    if not (d / "squad" / "dev-v1.1.json.gz").is_file():
        pytest.skip(f"real data not found under {d} (set RQA_DATA_DIR to ../shared/data)")
    return d


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """The cache and the ledger of the session's temporary folder, for every fixture of every
    scope (a module fixture that trains or evaluates runs before any function fixture): the
    tests' looks never reach the checkout's runs/ledger.jsonl."""
    base = tmp_path_factory.getbasetemp()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RQA_CACHE_DIR", str(base / "rqa-cache"))
        patch.setenv("RQA_LEDGER", str(base / "ledger.jsonl"))
        yield


@pytest.fixture
def one_thread():
    """One torch thread for the test (tiny models on a busy 2-core machine run ~100x slower
    with two), restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def tiny_squad_file(tmp_path) -> Path:
    return write_json_gz(tmp_path / "data" / "squad" / "dev-v1.1.json.gz", TINY_SQUAD)
