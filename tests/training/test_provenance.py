"""`rqa train --cfg`: the composed config, each value with where it came from; the run's
profile settings from the composition (the block it merged), not a second read."""

from __future__ import annotations

import io

import pytest
import yaml
from omegaconf import DictConfig, OmegaConf

from retrieval_qa.cli import main
from retrieval_qa.config import (
    COMMAND_LINE,
    annotated_yaml,
    compose_traced,
    experiment_profiles,
    load_experiment,
)
from retrieval_qa.training.run import command_line_settings, profile_settings

# each experiment at its first reduced profile (every layer kind: groups, parents, profiles)
SAMPLE = [(e, next(p for p in profiles if p != "paper"))
          for e, profiles in experiment_profiles().items() if len(profiles) > 1]


def _leaves(node, prefix=""):
    for key in node:
        value = node._get_node(key)
        if isinstance(value, DictConfig) and len(value):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def test_each_source_is_the_layer_that_set_the_value():
    composed = compose_traced(["experiment=endx_bert", "profile=cpu", "seed=3",
                               "model.gam.sigma=2.0"])
    src = composed.sources()
    assert src["seed"] == src["model.gam.sigma"] == src["experiment"] == COMMAND_LINE
    assert src["model.gam.detach_cross"] == "profile cpu (conf/experiment/endx_bert.yaml)"
    assert src["data.batch_size"] == "profile cpu (conf/experiment/dual_bert.yaml)"
    assert src["data.max_val_questions"].startswith("conf/profile/cpu.yaml (profile cpu")
    assert src["model.loss.symmetric"] == \
        "conf/model/dual_encoder.yaml (extended by conf/model/endx.yaml)"
    assert src["model.gam.kernel"] == "conf/model/endx.yaml"
    assert src["model.optimizer.lr"] == \
        "conf/experiment/dual_bert.yaml (extended by conf/experiment/endx_bert.yaml)"
    assert src["output_dir"] == "conf/train.yaml" and src["profile"] == COMMAND_LINE
    assert compose_traced(["experiment=endx_bert"]).sources()["profile"] == "conf/train.yaml"


def test_a_mapping_on_the_command_line_is_the_source_of_the_keys_it_names():
    src = compose_traced(["experiment=endx_gru", "model.cross_loss={similarity: dot}"]).sources()
    assert src["model.cross_loss.similarity"] == COMMAND_LINE
    assert src["model.cross_loss.scale"] == "conf/model/endx.yaml"


@pytest.mark.parametrize(("experiment", "profile"), SAMPLE)
def test_every_value_has_a_source_and_the_profile_settings_are_the_files(experiment, profile):
    """Every value of each experiment (at a reduced profile) has a source; the profile
    settings from the composition's block are what a read of the experiment file gave."""
    composed = compose_traced([f"experiment={experiment}", f"profile={profile}"])
    sources = composed.sources()
    assert not [k for k in _leaves(composed.cfg) if k not in sources]
    got = profile_settings(composed.cfg, composed.profile_block)
    assert list(got["settings"]) and not got["overridden"]
    # the file's settings, a short name (type: mlp) as the _target_ composition resolved
    read = profile_settings(composed.cfg, load_experiment(experiment).profiles[profile])
    for key, value in read["settings"].items():
        if key in read["overridden"]:  # not in the composed config: a resolved short name
            assert key.endswith((".type", ".name")), key
            assert got["settings"][key.rpartition(".")[0] + "._target_"]
        else:
            assert got["settings"][key] == value, key


def test_rqa_train_cfg_prints_the_annotated_config_and_trains_nothing(tmp_path):
    out = io.StringIO()
    assert main(["train", "--cfg", "experiment=dual_gru", "profile=cpu", "seed=7",
                 f"output_dir={tmp_path}"], stdout=out) == 0
    text = out.getvalue()
    assert not any(tmp_path.iterdir())  # no run folder
    assert "seed: 7  # command line\n" in text
    assert "  max_epochs: 1  # conf/profile/cpu.yaml" in text
    composed = compose_traced(["experiment=dual_gru", "profile=cpu", "seed=7",
                               f"output_dir={tmp_path}"])
    # the notes are YAML comments: the text reads back as the composed config
    assert yaml.safe_load(text) == OmegaConf.to_container(composed.cfg, resolve=False)
    assert text == annotated_yaml(composed.cfg, composed.sources())


def test_command_line_settings_leave_out_what_the_description_names_otherwise():
    given = ["experiment=dual_gru", "profile=cpu", "seed=3", "data.batch_size=4",
             "trainer.max_steps=20", "output_dir=runs/x", "logger=wandb", "logger.mode=online",
             "trainer.enable_progress_bar=false", "model.loss.scale=10"]
    assert command_line_settings(given, {"data.batch_size": 8}) == [
        "trainer.max_steps=20", "model.loss.scale=10"]
