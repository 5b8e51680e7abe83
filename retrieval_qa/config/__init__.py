"""Configuration: YAML files under ``conf/`` are the single source of every setting;
``key=value`` overrides from the command line must name existing keys.

A run's settings are composed once and passed down whole: constructors take them as required
arguments and keep no Python copy, so each setting is written in exactly one place. This
package is the only code that opens conf/:

- :mod:`.files`: finding and reading the files (``$RQA_CONF_PATH`` first), their
  ``extends:`` chains, and the read scope of a composition (:func:`reading`: each file read
  once);
- :mod:`.overrides`: ``key=value`` settings, checked against the keys and types they replace;
- :mod:`.ranges`: the allowed values of the numeric settings (``conf/ranges.yaml``);
- :mod:`.provenance`: where each value came from, and the annotated YAML of ``--cfg``;
- :mod:`.merge`: the steps of every composition (:class:`Composition`: layers merged in
  order, each recorded as it is merged; :func:`check_ranges`);
- :mod:`.experiment`: a training config (:func:`compose`, :func:`compose_traced`);
- :mod:`.pipeline`: a pipeline config (:func:`compose_pipeline`; its stages are built by
  :mod:`retrieval_qa.pipeline.composition`);
- :mod:`.settings`: the settings that code outside a composition reads (:func:`eval_settings`,
  :func:`model_defaults`, ...), asked for by what they are, not by their file."""

from __future__ import annotations

from .experiment import (
    Composed,
    compose,
    compose_group,
    compose_traced,
    experiment_profiles,
    load_experiment,
    load_group,
)
from .files import (
    chain,
    conf_dir,
    conf_dirs,
    conf_files,
    conf_names,
    find_conf,
    load_yaml,
    load_yaml_file,
    merge_extends,
    reading,
    shown_path,
    yaml_error_line,
)
from .merge import Composition, check_ranges, compose_file, merge_strict
from .overrides import apply_overrides, check_override, override_value, plain
from .pipeline import PipelineConfigError, compose_pipeline, pipeline_file
from .provenance import COMMAND_LINE, annotated_yaml, layer_keys, override_keys, resolve_sources
from .ranges import Rule, load_rules, out_of_range, rule_for
from .settings import (
    eval_settings,
    mine_defaults,
    model_defaults,
    reranker_training,
    search_settings,
    table_layout,
    threads_setting,
    trainer_settings,
)

__all__ = [
    "COMMAND_LINE", "Composed", "Composition", "PipelineConfigError", "Rule", "annotated_yaml",
    "apply_overrides", "chain", "check_override", "check_ranges", "compose", "compose_file",
    "compose_group", "compose_pipeline", "compose_traced", "conf_dir", "conf_dirs",
    "conf_files", "conf_names", "find_conf", "eval_settings", "experiment_profiles", "layer_keys", "load_experiment",
    "load_group", "load_rules", "load_yaml", "load_yaml_file", "merge_extends", "merge_strict",
    "mine_defaults", "model_defaults", "out_of_range", "override_keys", "override_value",
    "pipeline_file", "plain", "reading", "reranker_training", "resolve_sources", "rule_for",
    "search_settings", "shown_path", "table_layout", "threads_setting", "trainer_settings",
    "yaml_error_line",
]
