"""Training on mined pairs: data.mined maps the miner's table onto the DataModule's extra pair
source with weights (p^2, or 1 for the unweighted ablation), and `rqa train
experiment=mining_dual_augmented data.mined=DIR` runs end to end on tiny towers."""

from __future__ import annotations

import io
import json

import pytest
from helpers import from_conf
from mining_helpers import BagOfWordsRetriever, HashScorer, tiny_towers_config
from transformers import BertTokenizerFast

from retrieval_qa.data.mined import read_mined
from retrieval_qa.mining.miner import Miner, MiningSettings

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def mined(train_pool, tmp_path_factory):
    folder = tmp_path_factory.mktemp("mined") / "out"
    Miner(train_pool, BagOfWordsRetriever(), HashScorer(), folder,
          MiningSettings(shard_questions=16), progress=False).run()
    return folder


def _data(mining_dirs, **kw):
    tok = BertTokenizerFast.from_pretrained(mining_dirs["bert"])
    return from_conf("data", "multireqa_squad_mined", tokenizer=tok,
                     data_dir=str(mining_dirs["data"]), batch_size=8, **kw)


def test_mined_pairs_join_the_training_pairs_with_their_weights(mining_dirs, mined):
    pairs, weights, summary = read_mined(mined)
    assert len(pairs) == summary["mined_pairs"] > 0
    plain = _data(mining_dirs)
    gold = len(plain.train_pairs)
    assert plain.train_weights is None  # gold only: no weights, the plain loss
    weighted = _data(mining_dirs, mined=str(mined))
    info = weighted.describe()
    dropped = info["extra_pairs"][0]["dropped_validation_overlap"]
    assert len(weighted.train_pairs) == gold + len(pairs) - dropped
    assert weighted.train_weights[:gold] == [1.0] * gold
    kept = [w for p, w in zip(pairs, weights, strict=True)
            if p in weighted.train_pairs[gold:]]
    assert weighted.train_weights[gold:] == kept and all(0.25 <= w < 1 for w in kept)
    assert info["mined"]["weighting"] == "weighted" and info["weighted"] is True
    batch = next(iter(weighted.train_dataloader()))
    assert "weight" in batch
    unweighted = _data(mining_dirs, mined=str(mined), mined_weighting="unweighted")
    n = len(unweighted.train_pairs)
    assert unweighted.train_weights == [1.0] * n
    assert unweighted.train_pairs == weighted.train_pairs
    unused = _data(mining_dirs, mined=str(mined), mined_weighting="unused")
    assert unused.train_pairs == plain.train_pairs and unused.train_weights is None
    assert unused.describe()["mined"]["weighting"] == "unused"


def test_mined_setting_errors(mining_dirs, mined, tmp_path):
    with pytest.raises(ValueError, match="give data.mined=DIR"):
        _data(mining_dirs, mined="required")
    with pytest.raises(ValueError, match="mined_weighting"):
        _data(mining_dirs, mined=str(mined), mined_weighting="both")
    with pytest.raises(FileNotFoundError, match="not a finished `rqa mine` output"):
        _data(mining_dirs, mined=str(tmp_path))
    import shutil

    other = tmp_path / "other"
    shutil.copytree(mined, other)
    summary = json.loads((other / "summary.json").read_text())
    summary["dataset"] = "reqa_squad"
    (other / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ValueError, match="mined on reqa_squad/train"):
        _data(mining_dirs, mined=str(other))


def _overrides(mining_dirs, out, experiment, *extra):
    towers = tiny_towers_config(mining_dirs["bert"])
    enc = towers["encoder"]
    return [f"experiment={experiment}", "profile=cpu",
            "model.towers.encoder.type=gru", f"model.towers.encoder.pretrained={enc['pretrained']}",
            "model.towers.encoder.fallback=null", f"model.towers.encoder.vocab_size={enc['vocab_size']}",
            "model.towers.encoder.embedding_dim=16", "model.towers.encoder.hidden_size=16",
            "model.towers.encoder.dropout=0.0", "model.towers.encoder.num_layers=1",
            "model.towers.pooler.type=mean", "model.optimizer.lr=1e-3",
            f"data.data_dir={mining_dirs['data']}", "data.max_train_pairs=null",
            "data.max_val_questions=null", "data.batch_size=8", "data.max_question_length=16",
            "data.max_answer_length=32", f"output_dir={out}", "trainer.enable_progress_bar=false",
            "logger.name=none", "trainer.max_epochs=1", "threads=1", *extra]


def test_rqa_train_mining_dual_plain_and_augmented(mining_dirs, mined, tmp_path):
    from retrieval_qa.cli import main

    def run(*args) -> dict:
        out = io.StringIO()
        assert main(["train", *args], stdout=out) == 0
        return json.loads(out.getvalue().strip().splitlines()[-1])

    plain = run(*_overrides(mining_dirs, tmp_path, "mining_dual"))
    assert plain["data"]["weighted"] is False and "mined" not in plain["data"]
    assert plain["data"]["train"]["dataset"] == "multireqa_squad"
    assert "REBUILT" in plain["data"]["train"]["source"]
    test = plain["test"]
    assert test["dataset"] == "multireqa_squad" and test["pool"] == "test"
    assert {"p@1", "p@5", "p@10", "mrr"} <= set(test["metrics"])
    augmented = run(*_overrides(mining_dirs, tmp_path, "mining_dual_augmented",
                                f"data.mined={mined}"))
    assert augmented["data"]["weighted"] is True
    assert augmented["data"]["mined"]["weighting"] == "weighted"
    assert augmented["data"]["train"]["pairs"] == plain["data"]["train"]["pairs"]  # gold
    assert augmented["checkpoint"] != plain["checkpoint"]  # its own run folder
    unweighted = run(*_overrides(mining_dirs, tmp_path, "mining_dual_unweighted",
                                 f"data.mined={mined}"))
    assert unweighted["data"]["mined"]["weighting"] == "unweighted"
    out = io.StringIO()
    code = main(["train", *_overrides(mining_dirs, tmp_path / "x", "mining_dual_augmented")],
                stdout=out)
    assert code == 2  # data.mined not given: an error, not a plain run


def _damaged_copy(mined, tmp_path, target: str, how: str):
    """A copy of the mined folder with ``target`` (a file under it, or "pairs data": the
    pairs table's Arrow file) damaged ``how``; returns (folder, damaged file)."""
    import shutil

    folder = tmp_path / "mined"
    shutil.copytree(mined, folder)
    path = next((folder / "pairs").glob("data-*.arrow")) if target == "pairs data" \
        else folder / target
    data = path.read_bytes()
    path.write_bytes({"truncated": data[:len(data) // 2], "empty": b"",
                      "garbage": bytes(range(256)) * 8}[how])
    return folder, path


@pytest.mark.parametrize("target", ["summary.json", "pairs data", "pairs/dataset_info.json",
                                    "pairs/state.json"])
@pytest.mark.parametrize("how", ["truncated", "empty", "garbage"])
def test_damaged_mined_output_is_refused_naming_it(mined, tmp_path, target, how):
    from retrieval_qa.errors import InputFileError

    folder, path = _damaged_copy(mined, tmp_path, target, how)
    with pytest.raises(InputFileError) as e:
        read_mined(folder)
    message = str(e.value)
    assert message.startswith("data.mined ") and "damaged" in message
    assert str(path if target == "summary.json" else folder / "pairs") in message
    assert "run the same `rqa mine` command again" in message


def test_mined_tables_and_summary_that_disagree_are_refused(mined, tmp_path):
    import shutil

    from retrieval_qa.errors import InputFileError

    folder = tmp_path / "mined"
    shutil.copytree(mined, folder)
    summary = json.loads((folder / "summary.json").read_text())
    summary["mined_pairs"] += 1  # e.g. a summary of another run of the same folder
    (folder / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(InputFileError, match=r"pairs: damaged: .* mined pairs, summary.json "
                                             r"says"):
        read_mined(folder)
    old = {k: v for k, v in summary.items() if k != "gold_pairs"}  # an older summary
    (folder / "summary.json").write_text(json.dumps(old))
    with pytest.raises(InputFileError, match="no 'gold_pairs'"):
        read_mined(folder)


def test_rqa_train_refuses_a_damaged_mined_folder(mining_dirs, mined, tmp_path, capsys):
    from retrieval_qa.cli import main

    folder, path = _damaged_copy(mined, tmp_path, "summary.json", "truncated")
    code = main(["train", *_overrides(mining_dirs, tmp_path / "runs", "mining_dual_augmented",
                                      f"data.mined={folder}")], stdout=io.StringIO())
    err = capsys.readouterr().err
    assert code == 2 and str(path) in err and "damaged" in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()  # refused before any run folder
