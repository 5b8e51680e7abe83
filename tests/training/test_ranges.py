"""The ranges of the numeric settings (conf/ranges.yaml), checked when a config is composed:
the table covers every numeric or optional key of every experiment and profile, every
shipped composition passes it, and a bad value stops `rqa train` / `rqa export` with exit
status 2, the key, the value, the range and the fix, before any folder is written."""

from __future__ import annotations

import functools
import inspect
from unittest import mock

import pytest
from omegaconf import OmegaConf

from retrieval_qa.cli import main
from retrieval_qa.config import compose, experiment_profiles, load_yaml
from retrieval_qa.config import experiment as compose_module
from retrieval_qa.config.ranges import Rule, leaves, load_rules, out_of_range, rule_for
from retrieval_qa.errors import InputFileError, OutOfRangeError

# a list of mappings is empty in every experiment: one given here has its keys listed too
EXTRA_PAIRS = "data.extra_pairs=[{path: pairs.jsonl, weight: 1.0}]"


@functools.cache
def _compositions() -> dict[str, object]:
    """Every experiment in every profile it offers, composed (so checked), by name: the
    settings as the files and the command line write them, where composition checks the
    ranges (before it resolves the short names, which moves no value a rule covers)."""
    with mock.patch.object(compose_module, "resolve_blocks", lambda cfg: {}):
        out = {f"{e}/{p}": compose([f"experiment={e}", f"profile={p}"])
               for e, profiles in experiment_profiles().items() for p in profiles}
        out["dual_gru/cpu+extra_pairs"] = compose(["experiment=dual_gru", "profile=cpu",
                                                   EXTRA_PAIRS])
    return out


def _resolved_leaves() -> dict[str, list]:
    """Each dotted key of the compositions with its values, interpolations resolved (a key
    that points to another can still be set on its own)."""
    values: dict[str, list] = {}
    for cfg in _compositions().values():
        plain = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
        for key, value in leaves(plain):
            values.setdefault(key, []).append(value)
    return values


def _numeric(value) -> bool:
    if isinstance(value, list):
        return bool(value) and all(_numeric(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def test_every_experiment_and_profile_composes_within_its_ranges():
    compositions = _compositions()
    assert len(compositions) > 2 * len(experiment_profiles())  # paper, cpu and more
    rules = load_rules()
    assert {name: out_of_range(cfg, rules) for name, cfg in compositions.items()
            if out_of_range(cfg, rules)} == {}


def test_every_numeric_or_optional_key_has_a_rule():
    """A new setting that holds a number (or null, whose type the configs cannot tell) must
    get a rule in conf/ranges.yaml, or ``any`` when it is deliberately unrestricted."""
    rules = load_rules()
    values = _resolved_leaves()
    needs = {k for k, vs in values.items()
             if any(_numeric(v) for v in vs) or all(v is None for v in vs)}
    assert len(needs) > 100
    assert sorted(k for k in needs if rule_for(k, rules) is None) == []


def test_every_rule_applies_to_a_key():
    """No rule outlives its setting (a renamed key would leave its range unchecked): each
    applies to a key of an experiment, a pipeline or the reranker's training."""
    from tests.pipeline.test_composition import pipeline_leaves

    training = leaves(load_yaml("pipeline/training/reranker.yaml"))
    keys = {**_resolved_leaves(), **pipeline_leaves(), **dict(training)}
    declared = OmegaConf.to_container(load_yaml("ranges.yaml"))
    rules = load_rules()
    unused = [pattern for pattern in declared
              if not any(rule_for(k, {pattern: rules[pattern]}) for k in keys)]
    assert unused == []


def test_the_trainers_numeric_arguments_have_rules():
    """Each key of conf/trainer that pl.Trainer takes as a number (its annotation names int
    or float) has a rule, and so do the numeric settings of the callbacks."""
    import pytorch_lightning as pl

    trainer = load_yaml("trainer/default.yaml")
    parameters = inspect.signature(pl.Trainer.__init__).parameters
    numeric = [k for k in trainer if k in parameters
               and any(t in str(parameters[k].annotation) for t in ("int", "float"))]
    assert {"max_epochs", "max_steps", "devices", "val_check_interval", "limit_train_batches",
            "accumulate_grad_batches", "num_sanity_val_steps", "precision"} <= set(numeric)
    rules = load_rules()
    assert [k for k in numeric if rule_for(f"trainer.{k}", rules) is None] == []
    callbacks = [k for k, v in leaves(trainer.callbacks, "trainer.callbacks.")
                 if not isinstance(v, str) or "${" in str(v)]
    assert [k for k in callbacks if rule_for(k, rules) is None] == []


def test_rules_read_as_the_header_says():
    rule = Rule.parse("-1 or int >= 1", "here")
    assert rule.allowed == "-1 or an integer >= 1"
    assert [rule.allows(v) for v in (-1, 1, 7, 0, -2, 2.0, True, None, "1")] == \
        [True, True, True, False, False, False, False, False, False]
    unit = Rule.parse("[0, 1)", "here")
    assert [unit.allows(v) for v in (0, 0.5, 1, 1.0, -0.1, float("nan"))] == \
        [True, True, False, False, False, False]
    positive = Rule.parse("null or > 0", "here")
    assert [positive.allows(v) for v in (None, 1e-9, 0, float("inf"), "auto")] == \
        [True, True, False, False, False]
    assert Rule.parse("auto or string", "here").allows("x")
    each = Rule.parse("int >= 1", "here")
    assert each.allows([1, 5]) and not each.allows([1, 0]) and each.allows([])
    assert Rule.parse("null or list", "here").allows([-3, 0.5])
    assert Rule.parse("any", "here").allows({"a": 1})
    for bad in ("=> 1", "[0, 1", "between 0 and 1", "int auto"):
        with pytest.raises(ValueError, match="none of the forms"):
            Rule.parse(bad, "here")


def test_an_exact_key_wins_over_globs_and_globs_go_in_order():
    rules = {"*.dropout": Rule.parse("[0, 1)", "f"), "model.*": Rule.parse("any", "f"),
             "model.x.dropout": Rule.parse("[0, 0.5]", "f")}
    assert rule_for("model.x.dropout", rules).text == "[0, 0.5]"
    assert rule_for("model.y.dropout", rules).text == "[0, 1)"
    assert rule_for("model.lr", rules).text == "any"
    assert rule_for("seed", rules) is None


def _train(tmp_path, *overrides) -> int:
    return main(["train", "experiment=dual_gru", "profile=cpu",
                 f"output_dir={tmp_path / 'runs'}", *overrides])


# (override, the value as the message shows it, the allowed range in words)
BAD = [
    ("data.batch_size=-3", "an integer >= 1"),
    ("data.batch_size=null", "an integer >= 1"),
    ("data.max_train_pairs=0", "null or an integer >= 1"),
    ("data.num_workers=-1", "an integer >= 0"),
    ("data.val_fraction=1.0", "a number in (0, 1)"),
    ("model.towers.encoder.dropout=1.5", "a number in [0, 1)"),
    ("model.optimizer.lr=0", "a number > 0"),
    ("model.loss.scale=0", "a number > 0"),  # the inverse temperature of the softmax
    ("model.optimizer.warmup_ratio=1.5", "a number in [0, 1]"),
    ("trainer.max_steps=0", "-1 or an integer >= 1"),
    ("trainer.max_epochs=-2", "null or -1 or an integer >= 1"),
    ("trainer.limit_train_batches=1.5", "a number in [0, 1] or an integer >= 1"),
    ("trainer.devices=0", "-1 or an integer >= 1 or a string or a list"),
    ("eval.ks=[0, 5]", "a list of values that are each an integer >= 1"),
    ("seed=-1", "an integer in [0, 4294967295]"),
]


@pytest.mark.parametrize(("override", "allowed"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_value_stops_rqa_train_before_any_folder(override, allowed, tmp_path, capsys):
    key, value = override.split("=", 1)
    assert _train(tmp_path, override) == 2
    err = capsys.readouterr().err
    shown = "[0, 5]" if key == "eval.ks" else value
    assert f"{key}={shown} (set on the command line) is out of range: {key} takes {allowed} " \
           f"(its range in conf/ranges.yaml; fix: give {key} {allowed}" in err
    files = OmegaConf.select(compose(["experiment=dual_gru", "profile=cpu"]), key)
    example = "[1, 5, 10]" if key == "eval.ks" else str(files)
    assert f"e.g. {key}={example}, its value in the config files)" in err
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_rqa_export_checks_the_same_ranges(tmp_path, capsys):
    code = main(["export", "--output", str(tmp_path / "model"), "experiment=dual_gru",
                 "profile=cpu", "model.towers.encoder.dropout=1.5"])
    assert code == 2
    assert "model.towers.encoder.dropout=1.5 (set on the command line) is out of range" in \
        capsys.readouterr().err
    assert not (tmp_path / "model").exists()


def test_a_bad_value_in_a_config_file_names_the_file(tmp_path, monkeypatch):
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "leaky.yaml").write_text(
        "extends: dual_gru\nprofiles:\n  cpu:\n    model:\n      towers:\n        encoder:\n"
        "          dropout: 1.5\n")
    monkeypatch.setenv("RQA_CONF_PATH", str(tmp_path / "conf"))
    with pytest.raises(OutOfRangeError) as e:
        compose(["experiment=leaky", "profile=cpu"])
    assert e.value.key == "model.towers.encoder.dropout" and e.value.value == "1.5"
    assert "(set in profile cpu (conf/experiment/leaky.yaml))" in str(e.value)
    assert "fix: set model.towers.encoder.dropout in profile cpu (conf/experiment/leaky.yaml) " \
           "to a number in [0, 1))" in str(e.value)
    # the paper profile does not set it: it composes
    assert compose(["experiment=leaky", "profile=paper"]).model.towers.encoder.dropout == 0.1


def test_a_conf_path_adds_and_replaces_rules(tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    ranges = tmp_path / "conf" / "ranges.yaml"
    ranges.write_text('data.batch_size: "int [1, 16]"\n')
    monkeypatch.setenv("RQA_CONF_PATH", str(tmp_path / "conf"))
    rules = load_rules()
    assert rules["data.batch_size"].where == str(ranges)
    assert rules["*.dropout"].where == "conf/ranges.yaml"  # the packaged rules stay
    with pytest.raises(OutOfRangeError, match=r"an integer in \[1, 16\] \(its range in .*"
                                              r"ranges.yaml"):
        compose(["experiment=dual_gru", "profile=cpu", "data.batch_size=32"])
    ranges.write_text('data.batch_size: "=> 1"\n')
    with pytest.raises(InputFileError, match=r"ranges.yaml: the rule of 'data.batch_size', "
                                             r"'=> 1': '=> 1' is none of the forms"):
        load_rules()

