"""The settings that code outside a composition reads, each from the one file of conf/ that
holds it: what a module needs is asked for here by what it is (``eval_settings()``,
``model_defaults("bm25")``), never by the file's path, so no module outside this package
opens conf/."""

from __future__ import annotations

import copy
import functools
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..errors import UsageError
from .files import conf_dirs, load_chain, load_yaml

__all__ = ["eval_settings", "mine_defaults", "model_defaults", "reranker_training",
           "search_settings", "table_layout", "threads_setting", "trainer_settings"]

#: the file of the reranker's training settings (``python -m
#: retrieval_qa.classifiers.train_reranker``), as its messages name it
RERANKER_TRAINING = "conf/pipeline/training/reranker.yaml"


@functools.lru_cache(maxsize=32)
def _model_defaults(folders: tuple[str, ...], name: str) -> dict[str, Any]:
    del folders  # the cache key only: a later RQA_CONF_PATH or RQA_CONF_DIR is another search
    return OmegaConf.to_container(load_chain("model", name), resolve=False)  # type: ignore[return-value]


def model_defaults(name: str) -> dict[str, Any]:
    """The settings of ``conf/model/<name>.yaml`` (with its ``extends:``) as a plain dict, for
    code that composes a model's settings outside ``rqa train`` (BM25's, the cross classifier
    of ``rqa analyze bertqa``). Interpolations (``${model...}``) are left as written; read only
    sections that have none. A fresh copy on every call.

    Args:
        name: the model's file in conf/model (``bm25``, ``cross_classifier``).
    """
    return copy.deepcopy(_model_defaults(tuple(str(d) for d in conf_dirs()), name))


def eval_settings() -> DictConfig:
    """The shared evaluator's settings (conf/eval/default.yaml: ``top_k``, ``memory_mb``,
    ``ks``, ``doc_level``, ``encode_batch_size``), for the commands that evaluate outside a
    composed run."""
    return load_chain("eval", "default")


def search_settings() -> DictConfig:
    """The search settings over large pools (conf/search.yaml)."""
    return load_yaml("search.yaml")


def mine_defaults() -> DictConfig:
    """``rqa mine``'s settings (conf/mine/default.yaml), which its flags override."""
    return load_chain("mine", "default")


def trainer_settings(name: str) -> DictConfig:
    """The Trainer settings of conf/trainer/<name>.yaml (with its ``extends:``).

    Args:
        name: the file of conf/trainer (``default``, ``classifier``).
    """
    return load_chain("trainer", name)


def reranker_training(name: str = "reranker") -> DictConfig:
    """The reranker's training settings, conf/pipeline/training/<name>.yaml.

    Args:
        name: the file (``reranker``, ``reranker_listwise``).
    """
    return load_yaml(f"pipeline/training/{name}.yaml")


def table_layout(name: str) -> DictConfig:
    """A results table's layout, conf/tables/<name>.yaml (its ``rows``, ``title``, ...).

    Args:
        name: the table (``endx_table2``).
    """
    return load_yaml(f"tables/{name}.yaml")


def threads_setting(value: int | str | None = None) -> int | str:
    """The ``threads`` setting checked: a positive integer, or ``"auto"``; anything else is a
    :class:`UsageError` naming it and the fix.

    Args:
        value: an int or ``"auto"``; None or "": $RQA_THREADS, then the ``threads`` of
            conf/train.yaml (``${oc.env:RQA_THREADS,auto}``).
    """
    source = "threads"
    if value is None or value == "":
        value = load_yaml("train.yaml").get("threads", "auto")
        source = "$RQA_THREADS or threads in conf/train.yaml"
    if str(value).strip().lower() == "auto":
        return "auto"
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise UsageError(f"{source}={value!r}: expected a positive integer or auto (fix: "
                         "give a number of threads, e.g. threads=1, or auto)")
    return n
