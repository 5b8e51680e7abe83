import pytest
import torch

from retrieval_qa.config import conf_dir
from retrieval_qa.training.compose import compose

EXPERIMENTS = sorted(p.stem for p in (conf_dir() / "experiment").glob("*.yaml"))
RESIDUAL = {"fcrr", "convrr", "fcrr_convrr"}  # refiners over frozen vectors: no towers


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
    expected = ("endx" if name.startswith("endx") else
                "residual" if name in RESIDUAL else "dual_encoder")
    assert cfg.model.name == expected
    if profile == "cpu":
        assert "REDUCED" in cfg.description  # CPU profiles say what they cut
    if name.startswith("endx"):
        # the cross-encoder follows the towers' family and aggregator
        assert cfg.model.cross.encoder == cfg.model.towers.encoder


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


@pytest.mark.parametrize("name", [e for e in EXPERIMENTS if not e.endswith(("bert", "sde"))
                                  and not e.startswith("ade") and e not in RESIDUAL])
def test_cpu_profiles_of_trained_from_scratch_towers_build(name):
    """Shapes must agree (e.g. hidden size divisible by the attention heads); the word
    embeddings are replaced by a tiny random table so nothing is loaded."""
    from retrieval_qa.training.run import build_module

    cfg = compose([f"experiment={name}", "profile=cpu", "model.towers.encoder.vocab_size=50",
                   "model.towers.encoder.embedding_dim=8"])
    module = build_module(cfg.model)
    batch = {"input_ids": torch.randint(1, 50, (3, 7)), "attention_mask": torch.ones(3, 7)}
    q, a = module.towers(batch, batch)
    assert q.shape == a.shape and q.shape[0] == 3
    if name.startswith("endx"):
        cq, ca = module.cross_branch(batch, batch)
        assert cq.shape[0] == ca.shape[0] == 3
