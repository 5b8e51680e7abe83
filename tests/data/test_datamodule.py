"""ReQADataModule: setup (leak-free split, caps), loaders' structures, DDP sharding,
describe(), a Lightning fit smoke test, one integration test on the real data, and the
extension points: extra pair sources with weights (mined pairs) and frozen features."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import pytorch_lightning as pl
import torch
from helpers import TINY_SQUAD, WORDS, from_conf, synthetic_squad, write_json_gz
from omegaconf import OmegaConf
from transformers import BertTokenizerFast

from retrieval_qa.config import load_yaml
from retrieval_qa.data.datamodule import ReQADataModule
from retrieval_qa.data.features import FeatureTable
from retrieval_qa.data.loading import load_pool
from retrieval_qa.data.split import train_val_split
from retrieval_qa.data.types import QAPair


@pytest.fixture(scope="module")
def tokenizer():
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    return BertTokenizerFast(vocab={w: i for i, w in enumerate(specials + WORDS)})


@pytest.fixture
def data_dir(tmp_path):
    write_json_gz(tmp_path / "data" / "squad" / "train-v1.1.json.gz", synthetic_squad())
    write_json_gz(tmp_path / "data" / "squad" / "dev-v1.1.json.gz", TINY_SQUAD)
    return tmp_path / "data"


def make(tokenizer, data_dir, **kwargs) -> ReQADataModule:
    kwargs = {"batch_size": 8, "eval_batch_size": 16, "max_question_length": 16,
              "max_answer_length": 24, **kwargs}
    return from_conf("data", "reqa_squad", tokenizer=tokenizer, data_dir=data_dir, **kwargs)


def fake_trainer(world_size: int = 1, rank: int = 0, epoch: int = 0):
    return SimpleNamespace(world_size=world_size, global_rank=rank, current_epoch=epoch,
                           _accelerator_connector=SimpleNamespace(use_distributed_sampler=False))


def test_setup_splits_leak_free_and_loads_test_pool(tokenizer, data_dir):
    dm = make(tokenizer, data_dir)
    dm.setup("fit")
    pool, _ = load_pool("reqa_squad", "train", data_dir=data_dir)
    train, val = train_val_split(pool, 0.1, 0)
    assert dm.train_pairs == train and dm.val_pool.questions == val.questions
    assert len(dm.train_pairs) > 0 and len(dm.val_pool.questions) > 0
    assert not {p.question for p in dm.train_pairs} & set(dm.val_pool.questions)
    assert not {p.answer for p in dm.train_pairs} & {p.answer for p in dm.val_pool.pairs}
    assert len(dm.test_pool.questions) == 4  # the tiny dev file: "Where is Berlin?" twice
    assert dm.test_pool.pool == "dev"


def test_train_loader_batches(tokenizer, data_dir):
    dm = make(tokenizer, data_dir)
    dm.setup("fit")
    loader = dm.train_dataloader()
    batches = list(loader)
    assert len(batches) == len(loader) == len(dm.train_pairs) // 8
    for b in batches:
        assert set(b) == {"question", "answer", "index"}
        assert b["question"]["input_ids"].shape[0] == b["answer"]["input_ids"].shape[0] == 8
        assert b["question"]["input_ids"].shape[1] <= 16
        assert b["answer"]["input_ids"].shape[1] <= 24
        rows = [dm.train_pairs[i] for i in b["index"].tolist()]
        assert len({p.answer for p in rows}) == len({p.question for p in rows}) == 8
    seen = torch.cat([b["index"] for b in batches]).tolist()
    assert len(seen) == len(set(seen))


def test_train_order_follows_trainer_epoch_and_weights(tokenizer, data_dir):
    dm = make(tokenizer, data_dir, sampler_seed=3)
    dm.setup("fit")
    dm.trainer = fake_trainer(epoch=0)
    first = [b["index"].tolist() for b in dm.train_dataloader()]
    assert first == [b["index"].tolist() for b in dm.train_dataloader()]
    dm.trainer = fake_trainer(epoch=1)
    assert first != [b["index"].tolist() for b in dm.train_dataloader()]
    dm.set_train_weights([float(i) for i in range(len(dm.train_pairs))])
    batch = next(iter(dm.train_dataloader()))
    assert batch["weight"].tolist() == [float(i) for i in batch["index"].tolist()]
    with pytest.raises(ValueError):
        dm.set_train_weights([1.0])


def test_eval_loaders_cover_the_pools_with_indices(tokenizer, data_dir):
    dm = make(tokenizer, data_dir, answer_with_context=True)
    dm.setup("fit")
    for pool, loaders in ((dm.val_pool, dm.val_dataloader()), (dm.test_pool, dm.test_dataloader())):
        cand_loader, question_loader = loaders
        cands = list(cand_loader)
        assert set(cands[0]) == {"input_ids", "attention_mask", "token_type_ids", "index", "doc",
                                 "same_as"}
        assert cands[0]["token_type_ids"].max().item() == 1  # sentence + context segments
        assert sorted(torch.cat([b["index"] for b in cands]).tolist()) == list(
            range(len(pool.candidates)))
        qs = list(question_loader)
        assert sorted(torch.cat([b["index"] for b in qs]).tolist()) == list(
            range(len(pool.questions)))
        # the labels the evaluator needs travel with the batches
        for b in qs:
            assert b["gold"] == [pool.gold[i] for i in b["index"].tolist()]
        docs = {c.doc_id for c in pool.candidates}
        by_doc = {}
        for b in cands:
            for i, d in zip(b["index"].tolist(), b["doc"].tolist(), strict=True):
                by_doc.setdefault(d, set()).add(pool.candidates[i].doc_id)
        assert len(by_doc) == len(docs) and all(len(v) == 1 for v in by_doc.values())
        # with its context, a sentence repeated in another paragraph is another input
        same_as = {i: s for b in cands
                   for i, s in zip(b["index"].tolist(), b["same_as"].tolist(), strict=True)}
        assert same_as == {i: i for i in range(len(pool.candidates))}
        assert all(b["input_ids"].shape[1] <= 16 for b in qs)
        assert all(b["input_ids"].shape[1] <= 24 for b in cands)


def test_copies_of_a_sentence_point_at_the_first(tokenizer, data_dir):
    dm = make(tokenizer, data_dir)
    dm.setup("test")
    texts = [c.text for c in dm.test_pool.candidates]
    berlin = [i for i, t in enumerate(texts) if t == "Berlin is in Germany."]
    assert len(berlin) == 2  # in both paragraphs of the tiny dev file
    same_as = {i: s for b in dm.test_dataloader()[0]
               for i, s in zip(b["index"].tolist(), b["same_as"].tolist(), strict=True)}
    assert same_as == {i: berlin[0] if i in berlin else i for i in range(len(texts))}


def test_ddp_shards(tokenizer, data_dir):
    dm = make(tokenizer, data_dir, batch_size=4)
    dm.setup("fit")
    per_rank, cand_idx = [], []
    for rank in range(2):
        dm.trainer = fake_trainer(world_size=2, rank=rank)
        per_rank.append([b["index"].tolist() for b in dm.train_dataloader()])
        cand_idx.append(torch.cat([b["index"] for b in dm.val_dataloader()[0]]).tolist())
    assert len(per_rank[0]) == len(per_rank[1]) == len(dm.train_pairs) // 8
    for b0, b1 in zip(*per_rank, strict=True):
        rows = [dm.train_pairs[i] for i in b0 + b1]
        assert len({p.answer for p in rows}) == len({p.question for p in rows}) == 8
    assert not set(cand_idx[0]) & set(cand_idx[1])
    assert sorted(cand_idx[0] + cand_idx[1]) == list(range(len(dm.val_pool.candidates)))
    assert dm.describe()["global_batch_size"] == 8
    dm.trainer = SimpleNamespace(**{**vars(fake_trainer(2, 0)), "_accelerator_connector":
                                    SimpleNamespace(use_distributed_sampler=True)})
    with pytest.raises(RuntimeError, match="use_distributed_sampler=False"):
        dm.train_dataloader()


def test_caps_applied_and_described(tokenizer, data_dir):
    full = make(tokenizer, data_dir)
    dm = make(tokenizer, data_dir, max_train_pairs=50, max_val_questions=5)
    dm.setup("fit")
    assert len(dm.train_pairs) == 50 and set(dm.train_pairs) <= set(full.train_pairs)
    assert dm.train_pairs == make(tokenizer, data_dir, max_train_pairs=50).train_pairs
    val, fval = dm.val_pool, full.val_pool
    assert len(val.questions) == 5 and set(val.candidates) < set(fval.candidates)
    # candidates are exactly the sentences of the kept questions' paragraphs
    assert {c.context for c in val.candidates} == {p.context for p in val.pairs}
    for q, gold in zip(val.questions, val.gold, strict=True):  # same gold texts as before
        full_gold = fval.gold[fval.questions.index(q)]
        assert {val.candidates[i].text for i in gold} == {fval.candidates[i].text
                                                          for i in full_gold}
    assert {p.question for p in val.pairs} == set(val.questions)
    info = dm.describe()
    assert info["train"]["pairs"] == 50 and info["train"]["capped"] is True
    assert info["train"]["split_pairs"] == len(full.train_pairs)
    assert info["val"]["questions"] == 5 and info["val"]["capped"] is True
    assert info["val"]["split_questions"] == len(fval.questions)
    assert info["test"] == {"dataset": "reqa_squad", "pool": "dev"}
    _ = dm.test_pool
    assert dm.describe()["test"]["questions"] == 4
    assert full.describe()["train"]["capped"] is False


def test_test_cap_keeps_the_sentences_of_the_kept_questions(tokenizer, tmp_path):
    write_json_gz(tmp_path / "squad" / "train-v1.1.json.gz", synthetic_squad())
    write_json_gz(tmp_path / "squad" / "dev-v1.1.json.gz", synthetic_squad(n_paragraphs=12))
    full = make(tokenizer, tmp_path).test_pool
    dm = make(tokenizer, tmp_path, max_test_questions=5)
    test = dm.test_pool
    assert len(test.questions) == 5 and set(test.questions) <= set(full.questions)
    assert {c.context for c in test.candidates} == {p.context for p in test.pairs}
    assert len(test.candidates) < len(full.candidates)
    assert make(tokenizer, tmp_path, max_test_questions=5).test_pool.questions == test.questions
    info = dm.describe()["test"]
    assert info["questions"] == 5 and info["max_test_questions"] == 5 and info["capped"] is True


def test_from_config(tokenizer, data_dir):
    cfg = load_yaml("data/reqa_squad.yaml")
    cfg.data_dir = str(data_dir)
    dm = ReQADataModule.from_config(cfg, tokenizer, batch_size=4)
    assert dm.batch_size == 4 and dm.sampler_seed == 0 and dm.bucket_by_length is True
    root = OmegaConf.create({"seed": 11, "data": cfg})
    assert ReQADataModule.from_config(root.data, tokenizer).sampler_seed == 11
    with pytest.raises(TypeError, match="batch_sise"):
        ReQADataModule.from_config(cfg, tokenizer, batch_sise=3)


def test_bucket_lengths_are_token_counts_or_characters(tokenizer, data_dir):
    dm = make(tokenizer, data_dir)
    dm.setup("fit")
    pairs = dm.train_pairs[:20]
    q = tokenizer([p.question for p in pairs], truncation=True, max_length=16)["input_ids"]
    a = tokenizer([p.answer for p in pairs], truncation=True, max_length=24)["input_ids"]
    assert dm.bucket_unit == "tokens"       # the default
    assert dm.pair_lengths(pairs) == [len(x) + len(y) for x, y in zip(q, a, strict=True)]
    chars = make(tokenizer, data_dir, bucket_unit="chars")
    assert chars.pair_lengths(pairs) == [min(16, len(p.question) // 4 + 1)
                                         + min(24, len(p.answer) // 4 + 1) for p in pairs]
    assert dm.describe()["bucket_unit"] == "tokens"
    with pytest.raises(ValueError, match="bucket_unit='words'"):
        make(tokenizer, data_dir, bucket_unit="words")


class BagOfWords(pl.LightningModule):
    """Just enough of a retrieval module to drive Lightning's loops over the loaders."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.emb = torch.nn.EmbeddingBag(vocab, 8)
        self.train_indices: dict[int, list[int]] = {}
        self.eval_indices: dict[int, list[int]] = {0: [], 1: []}

    def encode(self, x):
        return self.emb(x["input_ids"], per_sample_weights=None)

    def training_step(self, batch, batch_idx):
        self.train_indices.setdefault(self.current_epoch, []).extend(batch["index"].tolist())
        scores = self.encode(batch["question"]) @ self.encode(batch["answer"]).T
        return torch.nn.functional.cross_entropy(scores, torch.arange(len(scores)))

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        self.eval_indices[dataloader_idx].extend(batch["index"].tolist())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_lightning_fit_smoke(tokenizer, data_dir, tmp_path):
    dm = make(tokenizer, data_dir)
    module = BagOfWords(len(tokenizer))
    trainer = pl.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0,
                         use_distributed_sampler=False, default_root_dir=tmp_path)
    trainer.fit(module, datamodule=dm)
    epochs = module.train_indices
    assert sorted(epochs) == [0, 1]
    assert len(epochs[0]) == len(epochs[1]) == 8 * (len(dm.train_pairs) // 8)
    assert epochs[0] != epochs[1]  # Lightning's set_epoch reached the batch sampler
    assert sorted(set(module.eval_indices[0])) == list(range(len(dm.val_pool.candidates)))
    assert sorted(set(module.eval_indices[1])) == list(range(len(dm.val_pool.questions)))


@pytest.mark.integration
def test_real_squad_datamodule(shared_data):
    from retrieval_qa.pretrained import PretrainedNotFoundError, load_tokenizer, resolve_pretrained

    try:
        tok = load_tokenizer(resolve_pretrained("minilm", allow_network=False))
    except PretrainedNotFoundError as e:
        pytest.skip(f"packaged MiniLM tokenizer not installed: {e}")
    cfg = load_yaml("data/reqa_squad.yaml")
    dm = ReQADataModule.from_config(cfg, tok, data_dir=str(shared_data), max_train_pairs=2000,
                                    max_val_questions=200)
    dm.setup("fit")
    assert len(dm.train_pairs) == 2000 and len(dm.val_pool.questions) == 200
    loader = dm.train_dataloader()
    assert len(loader) == 2000 // 32
    batch = next(iter(loader))
    assert batch["question"]["input_ids"].shape[0] == 32
    assert batch["question"]["input_ids"].shape[1] <= 64
    assert batch["answer"]["input_ids"].shape[1] <= 96
    rows = [dm.train_pairs[i] for i in batch["index"].tolist()]
    assert len({p.answer for p in rows}) == len({p.question for p in rows}) == 32
    cands = next(iter(dm.val_dataloader()[0]))
    assert cands["input_ids"].shape[0] == 128
    info = dm.describe()
    assert info["train"]["capped"] and info["train"]["split_pairs"] > 70000


# ---- extension points ---------------------------------------------------------------

def _jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_extra_pairs_from_a_file_carry_their_weights(tokenizer, data_dir, tmp_path):
    plain = make(tokenizer, data_dir)
    plain.setup("fit")
    val_question = plain.val_pool.questions[0]
    mined = _jsonl(tmp_path / "mined.jsonl", [
        {"question": "what is fact 1 of place 2?", "answer": "place 2 is a city .",
         "weight": 0.25},
        {"question": "where is the city?", "answer": "the city is here ."},   # file default
        {"question": val_question, "answer": "a sentence only mined ."},      # leaks: dropped
    ])
    dm = make(tokenizer, data_dir, extra_pairs=[{"path": str(mined), "weight": 0.5}])
    dm.setup("fit")
    n = len(plain.train_pairs)
    assert len(dm.train_pairs) == n + 2
    assert dm.train_weights == [1.0] * n + [0.25, 0.5]
    assert dm.describe()["extra_pairs"] == [{"name": "mined", "pairs": 3, "kept": 2,
                                             "dropped_validation_overlap": 1}]
    batches = list(dm.train_dataloader())
    weights = {int(i): float(w) for b in batches for i, w in zip(b["index"], b["weight"],
                                                                  strict=True)}
    assert all(weights[i] == dm.train_weights[i] for i in weights)


def test_a_pair_source_added_in_process_after_setup(tokenizer, data_dir):
    dm = make(tokenizer, data_dir)
    dm.setup("fit")
    n = len(dm.train_pairs)
    pair = QAPair("where is the city?", "the city is here .", "the city is here .", "m1", "m1")
    dm.add_pair_source("mined", [pair], [2.0])
    assert dm.train_pairs[-1] == pair and dm.train_weights[-1] == 2.0 and len(dm.train_pairs) == n + 1


def test_a_bad_record_names_the_file_the_line_and_the_fix(tokenizer, data_dir, tmp_path):
    bad = _jsonl(tmp_path / "bad.jsonl", [{"question": "q?", "answer": "a ."}, {"question": "q2?"}])
    with pytest.raises(ValueError, match=r"bad.jsonl, line 2: .*\"question\" and \"answer\""):
        make(tokenizer, data_dir, extra_pairs=[{"path": str(bad)}])


def _feature_file(dm, path, dim=6):
    texts = sorted({p.question for p in dm.train_pairs} | {p.answer for p in dm.train_pairs}
                   | set(dm.val_pool.questions) | {c.text for c in dm.val_pool.candidates}
                   | set(dm.test_pool.questions) | {c.text for c in dm.test_pool.candidates})
    vectors = torch.randn(len(texts), dim, generator=torch.Generator().manual_seed(0))
    torch.save({"texts": texts, "vectors": vectors}, path)
    return texts, vectors


def test_frozen_features_replace_tokens_in_every_loader(tokenizer, data_dir, tmp_path):
    plain = make(tokenizer, data_dir)
    plain.setup(None)
    texts, vectors = _feature_file(plain, tmp_path / "f.pt")
    row = {t: i for i, t in enumerate(texts)}
    dm = make(None, data_dir, features=str(tmp_path / "f.pt"))
    dm.setup(None)
    batch = next(iter(dm.train_dataloader()))
    assert set(batch["question"]) == {"features"} and batch["answer"]["features"].shape[1] == 6
    first = dm.train_pairs[int(batch["index"][0])]  # exact: rows copied from the table
    assert torch.equal(batch["question"]["features"][0], vectors[row[first.question]])
    candidates, questions = dm.test_dataloader()
    qb = next(iter(questions))
    assert set(qb) == {"features", "index", "gold"}
    assert torch.equal(qb["features"][0], vectors[row[dm.test_pool.questions[int(qb["index"][0])]]])
    assert "doc" in next(iter(candidates))


def test_a_missing_feature_fails_at_setup_naming_the_file(tokenizer, data_dir, tmp_path):
    plain = make(tokenizer, data_dir)
    plain.setup(None)
    texts, vectors = _feature_file(plain, tmp_path / "f.pt")
    torch.save({"texts": texts[1:], "vectors": vectors[1:]}, tmp_path / "short.pt")
    dm = make(None, data_dir, features=str(tmp_path / "short.pt"))
    with pytest.raises(KeyError, match=r"short.pt: no vector for 1 .* recompute the feature file"):
        dm.setup(None)


def test_feature_table_shape_errors():
    with pytest.raises(ValueError, match="one \\[D\\] row per text"):
        FeatureTable(["a", "b"], torch.zeros(3, 4))


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage"])
def test_a_damaged_feature_file_is_refused_naming_it(tmp_path, how):
    from retrieval_qa.errors import InputFileError

    path = tmp_path / "f.pt"
    torch.save({"texts": ["a", "b"], "vectors": torch.zeros(2, 4)}, path)
    data = path.read_bytes()
    path.write_bytes({"truncated": data[:len(data) // 2], "empty": b"",
                      "garbage": bytes(range(256)) * 4}[how])
    with pytest.raises(InputFileError, match=f"data.features {path}: damaged: .* write it "
                                             "again: torch.save"):
        FeatureTable.load(path)
