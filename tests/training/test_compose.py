import shutil

import pytest
import pytorch_lightning as pl
import torch
from omegaconf import OmegaConf

from retrieval_qa.config import (
    compose,
    conf_dir,
    conf_names,
    load_experiment,
    load_group,
    load_yaml,
)
from retrieval_qa.registry import locate

EXPERIMENTS = conf_names("experiment")  # $RQA_CONF_PATH's too: nothing listed by hand
PROFILES = [(e, p) for e in EXPERIMENTS for p in load_experiment(e).get("profiles", {})]


def test_the_issue_experiments_exist():
    assert set(EXPERIMENTS) >= {"dual_rnn", "dual_gru", "dual_lstm", "dual_transformer",
                                "dual_bert", "sde", "ade", "ade_ste", "ade_fte", "ade_spl",
                                "endx_rnn", "endx_gru", "endx_lstm", "endx_transformer",
                                "endx_bert"}


@pytest.mark.parametrize("name", EXPERIMENTS)
@pytest.mark.parametrize("profile", ["paper", "cpu"])
def test_every_experiment_composes_in_both_profiles(name, profile):
    cfg = compose([f"experiment={name}", f"profile={profile}"])
    assert cfg.experiment == name and cfg.profile == profile and cfg.description
    # the class that model._target_ names is a method of the suite's contract (a module and a
    # config make a method: nothing here names one)
    method = locate(cfg.model._target_)
    assert issubclass(method, pl.LightningModule), cfg.model._target_
    for name_ in ("build", "export", "describe"):
        assert callable(getattr(method, name_, None)), f"{cfg.model._target_} lacks {name_}"
    if profile == "cpu":
        assert "REDUCED" in cfg.description  # CPU profiles say what they cut
    if name.startswith("endx"):
        # the cross-encoder follows the towers' family and aggregator
        assert cfg.model.cross.encoder == cfg.model.towers.encoder


@pytest.mark.parametrize(("name", "profile"), [p for p in PROFILES if p[1] not in ("cpu",)])
def test_every_other_declared_profile_composes(name, profile):
    cfg = compose([f"experiment={name}", f"profile={profile}"])
    assert cfg.profile == profile and "REDUCED" in cfg.description


def _leaves(cfg, prefix: str = "") -> dict:
    """``{"a.b.c": value}`` of a (plain) nested dict."""
    out = {}
    for key, value in cfg.items():
        if isinstance(value, dict):
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_files_hold_only_what_differs(name):
    """An experiment that extends another, and a profile block (over its experiment, its
    parent's block and the shared profile it extends, conf/profile/), never repeats a setting
    with the value it already has."""
    own = OmegaConf.to_container(load_yaml(f"experiment/{name}.yaml"))
    parent_name = own.pop("extends", None)
    parent = OmegaConf.to_container(load_experiment(parent_name)) if parent_name else {}
    profiles, parent_profiles = own.pop("profiles", {}) or {}, parent.pop("profiles", {}) or {}
    before = _leaves(parent)
    repeated = [k for k, v in _leaves(own).items()
                if k != "description" and before.get(k, object()) == v]
    experiment = _leaves(OmegaConf.to_container(OmegaConf.merge(parent, own)))
    for profile, block in profiles.items():
        shared = block.pop("extends", None)
        inherited = {**experiment, **_leaves(parent_profiles.get(profile) or {})}
        for s in [shared] if isinstance(shared, str) else shared or []:
            inherited.update(_leaves(OmegaConf.to_container(load_group("profile", s))))
        repeated += [f"profiles.{profile}.{k}" for k, v in _leaves(block).items()
                     if inherited.get(k, object()) == v]
    assert not repeated, f"{name} repeats inherited settings: {repeated}"


def test_profiles_extend_shared_reductions_and_add_to_the_parents(tmp_path, monkeypatch):
    """``profiles.<p>.extends: NAME`` puts conf/profile/NAME.yaml under the block; a child's
    profile is merged over its parent's; a missing shared profile names the file."""
    shutil.copytree(conf_dir(), tmp_path / "conf")
    exp = tmp_path / "conf" / "experiment"
    (tmp_path / "conf" / "profile" / "tiny.yaml").write_text(
        "data: {batch_size: 3, max_train_pairs: 30}\ntrainer: {max_epochs: 2}\n")
    (exp / "toy_parent.yaml").write_text(
        "description: parent\nprofiles:\n  small:\n    extends: tiny\n"
        "    description: small\n    data: {batch_size: 5}\n")
    (exp / "toy_child.yaml").write_text(
        "extends: toy_parent\ndescription: child\nprofiles:\n  small:\n"
        "    extends: [cpu]\n    trainer: {max_steps: 7}\n")
    (exp / "toy_broken.yaml").write_text(
        "description: broken\nprofiles:\n  small: {extends: nope, description: x}\n")
    monkeypatch.setenv("RQA_CONF_DIR", str(tmp_path / "conf"))
    parent = compose(["experiment=toy_parent", "profile=small"])
    assert (parent.data.batch_size, parent.data.max_train_pairs) == (5, 30)
    assert parent.trainer.max_epochs == 2 and parent.description == "small"
    child = compose(["experiment=toy_child", "profile=small"])
    # conf/profile/cpu.yaml over the parent's block: its batch 64, pairs 20,000, 1 epoch
    assert (child.data.batch_size, child.data.max_train_pairs) == (64, 20000)
    assert (child.trainer.max_epochs, child.trainer.max_steps) == (1, 7)
    assert child.description == "small" and child.data.max_val_questions == 1000
    assert compose(["experiment=toy_child"]).description == "child"
    # what `rqa train` reads to report a profile's settings: the shared ones included, the
    # block's own keys first
    from retrieval_qa.config import load_group as load_composed

    block = load_composed("experiment", "toy_child").profiles.small
    assert "extends" not in block and list(block) == ["description", "data", "trainer"]
    assert block.data.max_val_questions == 1000 and block.trainer.max_steps == 7
    with pytest.raises(FileNotFoundError, match=r"toy_broken.yaml, profile 'small'.*nope"):
        compose(["experiment=toy_broken", "profile=small"])


def test_sharing_switch_and_overrides():
    cfg = compose(["experiment=ade_spl", "trainer.max_steps=7", "data.batch_size=3"])
    assert cfg.model.towers.sharing == "ade_spl" and cfg.trainer.max_steps == 7
    assert cfg.data.batch_size == 3


def test_misspelt_keys_and_unknown_names_fail_with_the_name():
    with pytest.raises(KeyError, match="max_epoch"):
        compose(["experiment=dual_gru", "trainer.max_epoch=2"])
    with pytest.raises(FileNotFoundError, match="nope"):
        compose(["experiment=nope"])
    with pytest.raises(ValueError, match="no profile 'fast'"):
        compose(["experiment=sde", "profile=fast"])
    with pytest.raises(ValueError, match="say which experiment"):
        compose([])


def _from_scratch(name: str) -> bool:
    """Whether the experiment's CPU profile trains its towers from scratch (read from its
    composed config, not listed: a new method with such towers is tested with no edit)."""
    towers = compose([f"experiment={name}", "profile=cpu"]).model.get("towers")
    return towers is not None and "encoder" in towers and \
        not towers.encoder._target_.endswith(".PretrainedTokenEncoder")


@pytest.mark.parametrize("name", [e for e in EXPERIMENTS if _from_scratch(e)])
def test_cpu_profiles_of_trained_from_scratch_towers_build(name):
    """Shapes must agree (e.g. hidden size divisible by the attention heads); the word
    embeddings are replaced by a tiny random table so nothing is loaded."""
    from retrieval_qa.registry import config_values, instantiate

    cfg = compose([f"experiment={name}", "profile=cpu", "model.towers.encoder.vocab_size=50",
                   "model.towers.encoder.embedding_dim=8"])
    module = instantiate(cfg.model, "model", evaluation=config_values(cfg.eval))
    batch = {"input_ids": torch.randint(1, 50, (3, 7)), "attention_mask": torch.ones(3, 7)}
    q, a = module.towers(batch, batch)
    assert q.shape == a.shape and q.shape[0] == 3
    if name.startswith("endx"):
        cq, ca = module.cross_branch(batch, batch)
        assert cq.shape[0] == ca.shape[0] == 3
