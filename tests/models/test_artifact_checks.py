"""Every load of a saved model checks the files it needs (issue 76, item 3): an export, a
sentence-transformers folder and a Hugging Face model folder with a file missing, cut short,
replaced or inconsistent (a tokenizer that is not the model's) is refused with one line naming
the file and the fix, never loaded with a default in its place (a tokenizer rebuilt without
its vocabulary maps every word to [UNK] and scores a fraction of the model's MRR)."""

from __future__ import annotations

import inspect
import io
import json
import shutil
from pathlib import Path

import pytest
import torch
from helpers import damage, save_dual_encoder, towers_conf, word_tokenizer
from mining_helpers import save_tiny_retriever, save_tokenizer

from retrieval_qa.cli import main
from retrieval_qa.errors import InputFileError
from retrieval_qa.models.artifact import (
    DEFAULT_MAP_LOCATION,
    check_model_folder,
    load_artifact,
    resolve_map_location,
)
from retrieval_qa.models.inference import DualEncoderInference
from retrieval_qa.written import Damaged

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
FIX = "export the model again"


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("export")
    save_tokenizer(root / "tokenizer")
    return save_tiny_retriever(root / "model", root / "tokenizer")


def _copy(export: Path, tmp_path: Path, older: bool = False) -> Path:
    """A copy of the export; ``older``: without the record of its files (exports written
    before it)."""
    folder = tmp_path / "model"
    shutil.copytree(export, folder)
    if older:
        meta = json.loads((folder / "model.json").read_text())
        del meta["contents"]
        (folder / "model.json").write_text(json.dumps(meta))
    return folder


def _refused(folder: Path, named: Path, *words: str) -> str:
    with pytest.raises(InputFileError) as e:
        load_artifact(folder, map_location="cpu")
    message = str(e.value)
    assert str(named) in message and FIX in message and "\n" not in message, message
    for word in words:
        assert word in message, message
    return message


def _other_tokenizer(folder: Path, words: list[str]) -> None:
    """``folder``'s tokenizer replaced by a word tokenizer of ``words``."""
    shutil.rmtree(folder)
    word_tokenizer(words).save_pretrained(folder)


def test_an_export_records_its_files_and_loads_whole(export):
    meta = json.loads((export / "model.json").read_text())
    assert sorted(meta["contents"]["files"]) == [
        "tokenizer/tokenizer.json", "tokenizer/tokenizer_config.json", "towers.pt"]
    model = load_artifact(export, map_location="cpu")
    assert "contents" not in model.meta  # kept out of the settings (and the shard digests)
    assert model.tokenizer("paris france")["input_ids"][1:3] != [1, 1]  # words, not [UNK]


@pytest.mark.parametrize("older", [False, True], ids=["recorded", "older-export"])
@pytest.mark.parametrize("name", ["tokenizer/tokenizer.json", "tokenizer/tokenizer_config.json",
                                  "towers.pt"])
def test_a_missing_file_is_named(export, tmp_path, name, older):
    folder = _copy(export, tmp_path, older)
    (folder / name).unlink()
    _refused(folder, folder / name, "missing")


def test_an_older_export_without_tokenizer_json_names_the_slow_vocabulary_too(export, tmp_path):
    folder = _copy(export, tmp_path, older=True)
    (folder / "tokenizer" / "tokenizer.json").unlink()
    _refused(folder, folder / "tokenizer" / "tokenizer.json", "nor vocab.txt")
    # a slow tokenizer's vocabulary in its place loads: the folder is whole
    vocab = json.loads((export / "tokenizer" / "tokenizer.json").read_text())["model"]["vocab"]
    (folder / "tokenizer" / "vocab.txt").write_text(
        "".join(w + "\n" for w, _ in sorted(vocab.items(), key=lambda kv: kv[1])))
    model = load_artifact(folder, map_location="cpu")
    assert model.tokenizer("paris")["input_ids"] == load_artifact(
        export, map_location="cpu").tokenizer("paris")["input_ids"]


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage"])
@pytest.mark.parametrize("name", ["tokenizer/tokenizer.json", "tokenizer/tokenizer_config.json",
                                  "towers.pt"])
def test_a_damaged_file_is_named(export, tmp_path, name, how):
    folder = _copy(export, tmp_path)
    damage(folder / name, how)
    _refused(folder, folder / name)
    older = _copy(export, tmp_path / "older", older=True)  # found without the record too
    damage(older / name, how)
    _refused(older, older / name)


def test_a_file_changed_since_the_export_is_named(export, tmp_path):
    folder = _copy(export, tmp_path)
    weights = folder / "towers.pt"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other content
    weights.write_bytes(bytes(data))
    _refused(folder, weights, "SHA-256")
    folder = _copy(export, tmp_path / "b")
    _other_tokenizer(folder / "tokenizer", ["paris", "rome"])
    _refused(folder, folder / "tokenizer" / "tokenizer.json", "bytes")


def test_a_tokenizer_of_special_tokens_alone_is_refused(export, tmp_path):
    """What transformers builds from tokenizer_config.json without its vocabulary file: every
    word [UNK]. An older export (no record) is refused by the vocabulary itself."""
    folder = _copy(export, tmp_path, older=True)
    _other_tokenizer(folder / "tokenizer", [])
    _refused(folder, folder / "tokenizer", "only its 5 special tokens", "[UNK]")


def test_a_tokenizer_of_more_ids_than_the_token_table_is_refused(export, tmp_path):
    folder = _copy(export, tmp_path, older=True)
    rows = json.loads((folder / "model.json").read_text())["towers"]["encoder"]["vocab_size"]
    _other_tokenizer(folder / "tokenizer", [f"w{i}" for i in range(rows)])
    _refused(folder, folder / "tokenizer", f"{rows + 5} token ids", f"{rows} rows")


def test_another_tokenizer_than_the_recorded_one_is_refused(export, tmp_path):
    """The record of the tokenizer's ids catches a smaller tokenizer (whose ids fit the
    table) even with its files' record rewritten to match."""
    from retrieval_qa.models.artifact import record_files

    folder = _copy(export, tmp_path)
    _other_tokenizer(folder / "tokenizer", ["paris", "rome"])
    meta = json.loads((folder / "model.json").read_text())
    meta["contents"]["files"] = record_files(folder, meta["contents"]["files"])
    (folder / "model.json").write_text(json.dumps(meta))
    _refused(folder, folder / "tokenizer", "gives 7 token ids", "recorded 235")


@pytest.mark.parametrize("key, value, words", [
    ("similarity", "euclid", "similarity 'euclid'"),
    ("max_question_length", 0, "max_question_length 0"),
    ("max_answer_length", "24", "max_answer_length '24'"),
    ("answer_with_context", "no", "answer_with_context 'no'"),
    ("contents", {"files": {"towers.pt": 3}}, "not a record of files"),
])
def test_a_setting_of_model_json_that_cannot_be_used_is_named(export, tmp_path, key, value,
                                                              words):
    folder = _copy(export, tmp_path)
    meta = json.loads((folder / "model.json").read_text())
    meta[key] = value
    (folder / "model.json").write_text(json.dumps(meta))
    _refused(folder, folder / "model.json", words)


def test_weights_of_other_towers_are_named(export, tmp_path):
    folder = _copy(export, tmp_path, older=True)
    state = torch.load(folder / "towers.pt")
    state.pop(next(iter(state)))
    torch.save(state, folder / "towers.pt")
    _refused(folder, folder / "towers.pt", "does not fit the towers")


def test_rqa_encode_stops_with_one_line_and_status_2(export, tmp_path, capsys):
    folder = _copy(export, tmp_path)
    (folder / "tokenizer" / "tokenizer.json").unlink()
    (tmp_path / "in.txt").write_text("paris\n")
    capsys.readouterr()
    code = main(["encode", "--checkpoint", str(folder), "--input", str(tmp_path / "in.txt"),
                 "--output", str(tmp_path / "q.pt"), "--quiet"], stdout=io.StringIO())
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0]
    assert str(folder / "tokenizer" / "tokenizer.json") in err[0] and FIX in err[0]
    assert not (tmp_path / "q.pt").exists()


def test_the_loaders_default_to_the_same_device_rule(monkeypatch):
    """load_artifact and DualEncoderInference.load take the same default ("auto": the GPU
    when CUDA is available, else the CPU), so a direct load and `rqa evaluate` agree."""
    for loader in (load_artifact, DualEncoderInference.load):
        assert inspect.signature(loader).parameters["map_location"].default \
            == DEFAULT_MAP_LOCATION == "auto"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_map_location("auto") == resolve_map_location(None) == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_map_location("auto") == "cuda"
    assert resolve_map_location("cpu") == "cpu"


def test_a_direct_load_is_checked_too(export, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert DualEncoderInference.load(export).device.type == "cpu"  # "auto" on a CPU machine
    folder = _copy(export, tmp_path)
    (folder / "tokenizer" / "tokenizer.json").unlink()
    with pytest.raises(InputFileError, match="tokenizer.json: damaged: missing"):
        DualEncoderInference.load(folder)


# ---- sentence-transformers folders (RetrievalTower.load) -----------------------------------


@pytest.fixture(scope="module")
def st_folder(tmp_path_factory) -> Path:
    pytest.importorskip("sentence_transformers")
    from retrieval_qa.export.sentence_transformers import export_sentence_transformers

    root = tmp_path_factory.mktemp("st")
    words = ["paris", "rome", "berlin", "capital", "what", "is", "the"]
    cfg = towers_conf(encoder={"type": "gru", "vocab_size": len(SPECIALS) + len(words),
                               "embedding_dim": 8, "hidden_size": 8, "dropout": 0.0},
                      pooler={"type": "mean"}, projection={"dim": None}, sharing="sde")
    src = save_dual_encoder(root / "src", word_tokenizer(words), cfg, "cosine")
    export_sentence_transformers(src, root / "st", model_card=False, modules="custom")
    return root / "st"


def _load_st(folder: Path):
    from retrieval_qa.export.sentence_transformers import RetrievalTower

    return RetrievalTower.load(str(folder))


def test_a_whole_sentence_transformers_folder_loads(st_folder):
    assert json.loads((st_folder / "rqa_tower.json").read_text())["tokenizer_ids"] == 12
    assert _load_st(st_folder).tokenizer("paris")["input_ids"] == [2, 5, 3]


@pytest.mark.parametrize("name, how, words", [
    ("tokenizer/tokenizer.json", "delete", "missing"),
    ("tokenizer/tokenizer_config.json", "delete", "missing"),
    ("tokenizer/tokenizer.json", "truncated", "not JSON"),
    ("model.safetensors", "delete", "missing"),
    ("model.safetensors", "garbage", "not the weights of the tower"),
    ("rqa_tower.json", "delete", "missing"),
    ("rqa_tower.json", "garbage", "not JSON"),
    ("tokenizer", "other", "gives 7 token ids"),
])
def test_a_sentence_transformers_folder_with_a_bad_file_is_refused(st_folder, tmp_path, name,
                                                                    how, words):
    folder = tmp_path / "st"
    shutil.copytree(st_folder, folder)
    if how == "delete":
        (folder / name).unlink()
    elif how == "other":
        _other_tokenizer(folder / name, ["paris", "rome"])
    else:
        damage(folder / name, how)
    with pytest.raises(InputFileError) as e:
        _load_st(folder)
    message = str(e.value)
    assert message.startswith(f"sentence-transformers model file {folder / name}"), message
    assert words in message and "--format sentence-transformers" in message
    assert str(st_folder.parent / "src") in message  # the export to convert again


# ---- Hugging Face model folders (the classifiers' and rerankers' exports) ------------------


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory) -> Path:
    from transformers import BertConfig, BertModel

    folder = tmp_path_factory.mktemp("hf") / "model"
    tok = word_tokenizer(["paris", "rome"])
    tok.save_pretrained(folder)
    BertModel(BertConfig(vocab_size=len(tok), hidden_size=8, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=8,
                         max_position_embeddings=16)).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("name, words", [
    ("config.json", "missing"), ("model.safetensors", "missing (nor pytorch_model.bin"),
    ("tokenizer.json", "missing"), ("tokenizer_config.json", "missing")])
def test_a_model_folder_missing_a_file_is_named(hf_folder, tmp_path, name, words):
    check_model_folder(hf_folder)
    folder = tmp_path / "model"
    shutil.copytree(hf_folder, folder)
    (folder / name).unlink()
    with pytest.raises(Damaged) as e:
        check_model_folder(folder)
    assert e.value.path == str(folder / name) and words in e.value.problem


def test_a_model_folder_with_a_larger_tokenizer_than_its_table_is_named(hf_folder, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(hf_folder, folder)
    word_tokenizer([f"w{i}" for i in range(10)]).save_pretrained(folder)
    with pytest.raises(Damaged, match="gives 15 token ids, but the token table of .*config.json "
                                      "has 7 rows"):
        check_model_folder(folder)


def test_a_pretrained_folder_without_its_vocabulary_is_not_a_tokenizer_of_unk(hf_folder,
                                                                               tmp_path):
    """The suite's one tokenizer loader (training, classifiers, rerankers) refuses a local
    folder whose tokenizer lost its vocabulary, instead of a tokenizer of [UNK]s."""
    from retrieval_qa.pretrained import load_tokenizer

    assert load_tokenizer(str(hf_folder))("paris")["input_ids"] == [2, 5, 3]
    folder = tmp_path / "model"
    shutil.copytree(hf_folder, folder)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(InputFileError, match=r"tokenizer.json: missing \(nor vocab.txt"):
        load_tokenizer(str(folder))

