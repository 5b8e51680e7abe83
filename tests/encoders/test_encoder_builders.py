"""Config-driven builders: every encoder type, OmegaConf input, whole blocks and errors."""

from __future__ import annotations

import pytest
import torch
from helpers import towers_conf
from omegaconf import OmegaConf

from retrieval_qa.config import conf_dir
from retrieval_qa.encoders import (
    PretrainedTokenEncoder,
    RecurrentTokenEncoder,
    TransformerTokenEncoder,
    build_dual_towers,
    build_token_encoder,
    build_tower,
    exported_towers,
)
from retrieval_qa.training.compose import compose


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
    pre = build_token_encoder({**enc, "type": "pretrained", "pretrained": tiny_checkpoint})
    assert isinstance(pre, PretrainedTokenEncoder) and pre.hidden_size == 32
    assert pre.checkpoint is not None and "local directory" in pre.checkpoint.label
    frozen = build_token_encoder({**enc, "type": "pretrained", "pretrained": tiny_checkpoint,
                                  "freeze_embeddings": True})
    assert not frozen.model.embeddings.word_embeddings.weight.requires_grad


def test_recurrent_on_checkpoint_word_embeddings(tiny_checkpoint, tiny_bert_factory):
    encoder = build_token_encoder(towers_conf(encoder={
        "type": "gru", "pretrained": tiny_checkpoint, "hidden_size": 16,
        "freeze_embeddings": True})["encoder"])
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


def test_conf_holds_the_papers_settings():
    conf = towers_conf()
    enc, pool = conf["encoder"], conf["pooler"]
    assert (enc["num_layers"], enc["hidden_size"], enc["num_heads"]) == (2, 768, 12)
    assert enc["bidirectional"] is True
    assert (pool["type"], pool["attention_dim"], pool["combine"]) == (
        "multihop_attention", 350, "concat")
    assert conf["sharing"] == "sde"
    assert conf["projection"] == {"dim": None, "normalize": False, "bias": False}


def test_the_builders_read_the_block_they_are_given_and_no_conf_file(tmp_path, monkeypatch,
                                                                     config_factory):
    """Nothing is filled in from conf/: a conf folder without the model files changes nothing
    (the block holds every setting), and a block without one is an error naming it."""
    whole, no_combine, no_chunk_rows = (config_factory("gru") for _ in range(3))
    del no_combine["pooler"]["combine"]
    del no_chunk_rows["encoder"]["chunk_rows"]
    (tmp_path / "conf").mkdir()
    monkeypatch.setenv("RQA_CONF_DIR", str(tmp_path / "conf"))
    assert conf_dir() == tmp_path / "conf"
    assert build_tower(whole).output_dim == 3 * 32
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'combine'"):
        build_tower(no_combine)
    with pytest.raises(KeyError, match=r"towers has no 'pooler'"):
        build_tower({"encoder": whole["encoder"]})
    with pytest.raises(KeyError, match=r"towers\.encoder has no 'chunk_rows'"):
        build_dual_towers(no_chunk_rows)


def test_a_composed_block_names_its_classes(tmp_path):
    """Composition resolves the short names: the block holds each class's ``_target_`` and the
    arguments it takes, and builds the same towers as the short-named block."""
    towers = compose(["experiment=dual_gru", "profile=cpu", "model.towers.encoder.vocab_size=50",
                      "model.towers.encoder.embedding_dim=8"]).model.towers
    assert towers.encoder._target_.endswith("RecurrentTokenEncoder")
    assert towers.encoder.kind == "gru" and "num_heads" not in towers.encoder
    assert towers.pooler._target_.endswith("MultiHopSelfAttentionPooler")
    short = towers_conf(encoder={"type": "gru", "pretrained": towers.encoder.pretrained,
                                 "hidden_size": 256, "vocab_size": 50, "embedding_dim": 8})
    torch.manual_seed(0)
    built = build_dual_towers(towers)
    torch.manual_seed(0)
    again = build_dual_towers(short)
    assert all(torch.equal(a, b) for a, b in zip(built.state_dict().values(),
                                                 again.state_dict().values(), strict=True))
    with pytest.raises(TypeError, match=r"towers\.encoder \(_target_ .*num_heads"):
        build_dual_towers({**OmegaConf.to_container(towers),
                           "encoder": {**towers.encoder, "num_heads": 4}})


def test_exports_of_earlier_versions_lack_the_settings_added_since(config_factory):
    old = config_factory("gru")
    for key in ("chunk_rows", "input_types"):
        del old["encoder"][key]
    tower = build_dual_towers(exported_towers(old)).question_tower
    assert tower.chunk_rows is None and tower.input_types is None


def test_other_top_level_keys_are_left_to_their_owners(config_factory):
    cfg = {**config_factory("gru"), "name": "dual_encoder", "loss": {"scale": 20.0}}
    assert build_dual_towers(cfg).sharing == "sde"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sharing": "shared"}, r"sharing='shared'.*'sde'.*'ade'.*'ade_ste'.*'ade_fte'.*'ade_spl'"),
        ({"encoder": {"type": "cnn"}}, r"encoder\.type='cnn'.*'pretrained'.*'gru'"),
        ({"pooler": {"type": "max"}}, r"pooler\.type='max'"),
        ({"encoder": {"positions": "rotary", "type": "transformer"}},
         r"encoder \(_target_ .*TransformerTokenEncoder\): positions='rotary'"),
        ({"encoder": {"hiden_size": 3}}, r"towers\.encoder: unknown key.*hiden_size"),
        ({"projection": {"dims": 8}}, r"unknown key.*dims.*in towers\.projection"),
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
    if encoder_type == "pretrained":  # the checkpoint's own embeddings
        enc.update(pretrained=tiny_checkpoint, vocab_size=None, embedding_dim=None)
    tower = build_tower(config_factory(encoder=enc, pooler={"type": pooler},
                                       projection={"dim": 8, "normalize": True})).eval()
    ids, mask = batch_factory([6, 4, 1])
    with torch.no_grad():
        short = tower(ids, mask)
        long = tower(*pad_factory(ids, mask, 7))
    torch.testing.assert_close(long, short, atol=1e-5, rtol=1e-4)


def test_the_pretrained_label_says_what_of_the_checkpoint_the_towers_use():
    """A GRU over MiniLM's word embeddings uses its tokenizer and token table only: the
    label of its outputs (Table 2's notes) says so; a pretrained encoder is the model."""
    from retrieval_qa.encoders.builders import checkpoint_use

    label = "sentence-transformers/all-MiniLM-L6-v2 (packaged, standing in for bert-base-uncased)"
    assert checkpoint_use({"type": "pretrained"}, label) == label
    for kind in ("gru", "lstm", "rnn", "transformer"):
        assert checkpoint_use({"type": kind, "embedding_dim": None}, label) == \
            f"only the tokenizer and token-embedding table of {label}"
    assert checkpoint_use({"type": "gru", "embedding_dim": 64}, label) == \
        f"only the tokenizer of {label} (a random token-embedding table)"
