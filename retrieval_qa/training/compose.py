"""Moved: composing a training config is :mod:`retrieval_qa.config.experiment`'s (the config
package, issue 72). These names stay importable here for the code that still imports them
from this module (retrieval_qa/sweeps, experiments/, tests); new code imports them from
:mod:`retrieval_qa.config`."""

from __future__ import annotations

from ..config import (
    Composed,
    check_ranges,
    compose,
    compose_file,
    compose_group,
    compose_traced,
    experiment_profiles,
    load_experiment,
    load_group,
    merge_strict,
)

__all__ = ["Composed", "check_ranges", "compose", "compose_file", "compose_group",
           "compose_traced", "experiment_profiles", "load_experiment", "load_group",
           "merge_strict"]
