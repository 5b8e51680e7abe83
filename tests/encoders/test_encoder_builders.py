"""Config-driven builders: every encoder type, OmegaConf input, defaults and errors."""

from __future__ import annotations

import shutil

import pytest
import torch
from omegaconf import OmegaConf

from retrieval_qa.config import conf_dir
from retrieval_qa.encoders import (
    MultiHopSelfAttentionPooler,
    PretrainedTokenEncoder,
    RecurrentTokenEncoder,
    TransformerTokenEncoder,
    build_dual_towers,
    build_token_encoder,
    build_tower,
    tower_defaults,
)


@pytest.mark.parametrize("encoder_type", ["rnn", "gru", "lstm", "transformer"])
@pytest.mark.parametrize("combine", ["concat", "mean"])
def test_every_encoder_type_end_to_end(encoder_type, combine, config_factory, batch_factory):
    model = build_dual_towers(config_factory(encoder_type, "sde", pooler={"combine": combine}))
    expected = 3 * 32 if combine == "concat" else 32
    assert model.output_dim == expected
    ids, mask = batch_factory([5, 2])
    q = model.encode_question(ids, mask)
    a = model.encode_answer(ids, mask)
    assert q.shape == a.shape == (2, expected)


def test_builder_picks_the_right_classes(config_factory, tiny_checkpoint):
    enc = config_factory("lstm")["encoder"]
    encoder = build_token_encoder(enc)
    assert isinstance(encoder, RecurrentTokenEncoder) and encoder.rnn.bidirectional
    assert encoder.rnn.num_layers == 2 and encoder.rnn.hidden_size == 16  # 2 x 16 = 32
    assert isinstance(build_token_encoder({**enc, "type": "transformer"}), TransformerTokenEncoder)
    pre = build_token_encoder({"type": "pretrained", "pretrained": tiny_checkpoint})
    assert isinstance(pre, PretrainedTokenEncoder) and pre.hidden_size == 32
    assert pre.checkpoint is not None and "local directory" in pre.checkpoint.label
    frozen = build_token_encoder({"type": "pretrained", "pretrained": tiny_checkpoint,
                                  "freeze_embeddings": True})
    assert not frozen.model.embeddings.word_embeddings.weight.requires_grad


def test_recurrent_on_checkpoint_word_embeddings(tiny_checkpoint, tiny_bert_factory):
    encoder = build_token_encoder({"type": "gru", "pretrained": tiny_checkpoint,
                                   "hidden_size": 16, "freeze_embeddings": True})
    expected = tiny_bert_factory().get_input_embeddings().weight
    torch.testing.assert_close(encoder.embedder.embedding.weight, expected)
    assert encoder.embedder.frozen


def test_omegaconf_input_projection_and_normalize(config_factory, batch_factory):
    cfg = OmegaConf.create(config_factory("gru", "ade", projection={"dim": 8, "normalize": True}))
    model = build_dual_towers(cfg)
    ids, mask = batch_factory([4, 3])
    q = model.encode_question(ids, mask)
    assert q.shape == (2, 8)
    torch.testing.assert_close(q.norm(dim=-1), torch.ones(2))


def test_defaults_follow_the_papers():
    defaults = tower_defaults()
    enc, pool = defaults["encoder"], defaults["pooler"]
    assert (enc["num_layers"], enc["hidden_size"], enc["num_heads"]) == (2, 768, 12)
    assert enc["bidirectional"] is True
    assert (pool["type"], pool["attention_dim"], pool["combine"]) == (
        "multihop_attention", 350, "concat")
    assert defaults["sharing"] == "sde"
    assert defaults["projection"] == {"dim": None, "normalize": False, "bias": False}


def test_defaults_are_read_from_conf(tmp_path, monkeypatch, config_factory):
    """conf/model/dual_encoder.yaml is the only place of the defaults: a changed file changes
    what the builders fill in, and the allowed keys are its keys."""
    shutil.copytree(conf_dir(), tmp_path / "conf")
    path = tmp_path / "conf" / "model" / "dual_encoder.yaml"
    cfg = OmegaConf.load(path)
    assert tower_defaults() == OmegaConf.to_container(cfg.towers)
    cfg.towers.pooler.hops = 3
    OmegaConf.save(cfg, path)
    monkeypatch.setenv("RQA_CONF_DIR", str(tmp_path / "conf"))
    tower = build_tower({"encoder": config_factory("gru")["encoder"]})
    assert tower.output_dim == 3 * 32
    with pytest.raises(ValueError, match=r"unknown key.*'hopz'.*allowed:.*'attention_dim'"):
        build_tower({"encoder": config_factory("gru")["encoder"], "pooler": {"hopz": 2}})


def test_other_top_level_keys_are_left_to_their_owners(config_factory):
    cfg = {**config_factory("gru"), "name": "dual_encoder", "loss": {"scale": 20.0}}
    assert build_dual_towers(cfg).sharing == "sde"


def test_tower_from_partial_config(config_factory):
    tower = build_tower({"encoder": config_factory("gru")["encoder"]})
    assert isinstance(tower.pooler, MultiHopSelfAttentionPooler)
    assert tower.output_dim == 4 * 32 and tower.projection is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sharing": "shared"}, r"sharing='shared'.*'sde'.*'ade'.*'ade_ste'.*'ade_fte'.*'ade_spl'"),
        ({"encoder": {"type": "cnn"}}, r"encoder\.type='cnn'.*'pretrained'.*'gru'"),
        ({"pooler": {"type": "max"}}, r"pooler\.type='max'"),
        ({"encoder": {"positions": "rotary", "type": "transformer"}},
         r"encoder \(_target_ .*TransformerTokenEncoder\): positions='rotary'"),
        ({"encoder": {"hiden_size": 3}}, r"unknown key.*hiden_size.*in encoder"),
        ({"projection": {"dims": 8}}, r"unknown key.*dims.*in projection"),
        ({"encoder": {"vocab_size": 10, "embedding_dim": None}}, r"vocab_size.*embedding_dim"),
    ],
)
def test_config_errors_name_the_key(change, message, config_factory):
    cfg = config_factory("gru")
    for key, value in change.items():
        if isinstance(value, dict) and key in cfg:
            cfg[key].update(value)
        else:
            cfg[key] = value
    with pytest.raises(ValueError, match=message):
        build_dual_towers(cfg)


@pytest.mark.parametrize("encoder_type", ["rnn", "gru", "lstm", "transformer", "pretrained"])
@pytest.mark.parametrize("pooler", ["multihop_attention", "mean", "cls"])
def test_tower_output_ignores_padding(encoder_type, pooler, config_factory, batch_factory,
                                      pad_factory, tiny_checkpoint):
    enc = {"type": encoder_type}
    if encoder_type == "pretrained":
        enc.update(pretrained=tiny_checkpoint, vocab_size=None, embedding_dim=None)
    tower = build_tower(config_factory(encoder=enc, pooler={"type": pooler},
                                       projection={"dim": 8, "normalize": True})).eval()
    ids, mask = batch_factory([6, 4, 1])
    with torch.no_grad():
        short = tower(ids, mask)
        long = tower(*pad_factory(ids, mask, 7))
    torch.testing.assert_close(long, short, atol=1e-5, rtol=1e-4)
