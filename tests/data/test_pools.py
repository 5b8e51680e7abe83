"""The data module's pools part alone: the settings are the data block's keys, the training
pool is split leak-free and capped once, the test pool is loaded on first use, and both are
described for the run's report."""

from __future__ import annotations

import inspect
from dataclasses import fields, replace

import pytest
from helpers import synthetic_squad, write_json_gz

from retrieval_qa.config import load_yaml
from retrieval_qa.data import pools as pools_module
from retrieval_qa.data.caps import cap_pairs
from retrieval_qa.data.datamodule import ReQADataModule
from retrieval_qa.data.loaders import LoaderSettings
from retrieval_qa.data.loading import load_pool
from retrieval_qa.data.pools import Pools, PoolSettings
from retrieval_qa.data.split import train_val_split
from retrieval_qa.data.token_memo import TokenSettings
from retrieval_qa.registry import config_values


@pytest.fixture
def settings(tiny_squad_file) -> PoolSettings:
    """The conf's pool settings over a synthetic training file and the tiny dev file."""
    data_dir = tiny_squad_file.parents[1]
    write_json_gz(data_dir / "squad" / "train-v1.1.json.gz", synthetic_squad(n_paragraphs=12))
    return replace(PoolSettings.from_block(config_values(load_yaml("data/reqa_squad.yaml"))),
                   data_dir=data_dir)


def test_the_parts_settings_are_the_data_blocks_keys():
    block = config_values(load_yaml("data/reqa_squad.yaml"))
    parts = [f.name for cls in (PoolSettings, TokenSettings, LoaderSettings) for f in fields(cls)]
    assert len(parts) == len(set(parts))  # each key in one part
    own = {"extra_pairs", "features"}     # the pair sources' and the token memo's inputs
    assert set(parts) | own == set(block)
    keywords = set(inspect.signature(ReQADataModule).parameters) - {"tokenizer"}
    assert keywords == set(block)


def test_the_split_is_leak_free_capped_and_made_once(settings, monkeypatch):
    calls = []

    def counted(*args, **kwargs):
        calls.append(args)
        return load_pool(*args, **kwargs)

    monkeypatch.setattr(pools_module, "load_pool", counted)
    pools = Pools(replace(settings, max_train_pairs=20, max_val_questions=3))
    assert not pools.split_done
    split = pools.train_split()
    assert pools.split_done and pools.train_split() is split and len(calls) == 1
    pool, _ = load_pool("reqa_squad", "train", data_dir=settings.data_dir)
    train, val = train_val_split(pool, settings.val_fraction, settings.split_seed)
    assert split.pairs == cap_pairs(train, 20, settings.split_seed) and len(split.pairs) == 20
    assert len(split.val_pool.questions) == 3
    assert set(split.val_pool.questions) <= set(val.questions)
    assert not {p.question for p in split.pairs} & set(split.val_pool.questions)
    assert split.train_info["pool_pairs"] == len(pool.pairs)
    assert split.train_info["split_pairs"] == len(train)
    assert (split.train_info["pairs"], split.train_info["capped"]) == (20, True)
    assert split.val_info["split_questions"] == len(val.questions)
    assert (split.val_info["questions"], split.val_info["capped"]) == (3, True)
    assert split.val_info["pool"] == "train-val"


def test_uncapped_the_split_keeps_everything(settings):
    split = Pools(settings).train_split()
    assert split.train_info["capped"] is False and split.val_info["capped"] is False
    assert split.train_info["pairs"] == split.train_info["split_pairs"] == len(split.pairs)


def test_the_test_pool_is_loaded_on_first_use_and_described(settings):
    pools = Pools(settings)
    assert pools.describe_test() == {"dataset": "reqa_squad", "pool": "dev"}
    pool = pools.test_pool
    assert pools.test_pool is pool and len(pool.questions) == 4  # the tiny dev file
    assert not pools.split_done  # the test pool alone loads no training pool
    test = pools.describe_test()
    assert test["questions"] == 4 and test["candidates"] == len(pool.candidates)
    assert "capped" not in test
    assert pools.describe_split() == {"val_fraction": settings.val_fraction,
                                      "seed": settings.split_seed}


def test_the_test_cap_is_described(settings):
    pools = Pools(replace(settings, max_test_questions=2))
    assert len(pools.test_pool.questions) == 2
    test = pools.describe_test()
    assert (test["questions"], test["max_test_questions"], test["capped"]) == (2, 2, True)
