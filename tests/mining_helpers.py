"""Fixtures of the supervised-mining tests: MultiReQA-layout files written from SQuAD-format
data (train boundaries without an MRQA train file, as on the shared data; an MRQA dev file
with its boundaries for the test pool), a tiny word tokenizer, a tiny random BERT for the
classifier and a tiny dual-encoder export for the retriever."""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
from helpers import WORDS, synthetic_squad, towers_conf, write_json_gz, write_jsonl_gz

from retrieval_qa.data.splitter import split_sentences

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *map(str, range(200)), "?", ".",
         "fact", "form", "(", ")", "which", "number", "is", "in", "capital", "paris",
         "france", "berlin", "germany", "tower", "munich", "bavaria", "state", "has"]


def fake_qid(*parts) -> str:
    """A 32-hex id like MRQA's (unrelated to the SQuAD id, as in the real files)."""
    return hashlib.md5("/".join(map(str, parts)).encode()).hexdigest()


def boundaries_of(squad: dict, dataset: str = "SQuAD", salt: str = "") -> list[dict]:
    """MultiReQA boundary lines of every paragraph of a SQuAD-format object (sentence spans of
    the project's splitter, end exclusive; the key: one fake qid per question)."""
    rows = []
    for a, article in enumerate(squad["data"]):
        for p, para in enumerate(article["paragraphs"]):
            key = "/".join(fake_qid(salt, a, p, q) for q in range(len(para["qas"])))
            for k, (s, e) in enumerate(split_sentences(para["context"])):
                rows.append({"candidate_id": f"{dataset}_{key}/_{k}", "response_start": s,
                             "response_end": e})
    return sorted(rows, key=lambda r: r["candidate_id"])  # the real files are sorted by id


def mrqa_lines(squad: dict, salt: str = "dev") -> list[dict]:
    """An MRQA-format file of a SQuAD-format object (header, then one context a line; the
    qids those of :func:`boundaries_of` with the same salt; char_spans inclusive)."""
    rows = [{"header": {"dataset": "SQuAD", "split": "dev"}}]
    for a, article in enumerate(squad["data"]):
        for p, para in enumerate(article["paragraphs"]):
            qas = []
            for q, qa in enumerate(para["qas"]):
                spans = [{"text": x["text"], "char_spans": [[x["answer_start"],
                                                             x["answer_start"] + len(x["text"]) - 1]]}
                         for x in qa["answers"]]
                qas.append({"qid": fake_qid(salt, a, p, q), "id": qa["id"],
                            "question": qa["question"], "answers": [x["text"] for x in qa["answers"]],
                            "detected_answers": spans})
            rows.append({"context": para["context"], "qas": qas})
    return rows


def held_out_squad() -> dict:
    """A small SQuAD-format test file whose texts differ from the training ones."""
    data = synthetic_squad(6)
    for article in data["data"]:
        for para in article["paragraphs"]:
            para["context"] = para["context"].replace("place", "city")
            for qa in para["qas"]:
                qa["question"] = qa["question"].replace("place", "city")
                qa["id"] = "test-" + qa["id"]
    return data


def write_multireqa_dir(root: Path, n_paragraphs: int = 12) -> Path:
    """``root`` as a data dir: squad/train-v1.1.json.gz and MultiReQA train boundaries (no
    MRQA train file: the pool is rebuilt), MRQA dev + MultiReQA dev boundaries (the test
    pool). Returns ``root``."""
    train = synthetic_squad(n_paragraphs)
    write_json_gz(root / "squad" / "train-v1.1.json.gz", train)
    write_jsonl_gz(root / "multireqa" / "train" / "SQuAD" / "candidates.json.gz",
                   boundaries_of(train, salt="train"))
    test = held_out_squad()
    write_jsonl_gz(root / "mrqa" / "dev" / "SQuAD.jsonl.gz", mrqa_lines(test, "dev"))
    write_jsonl_gz(root / "multireqa" / "dev" / "SQuAD" / "candidates.json.gz",
                   boundaries_of(test, salt="dev"))
    return root


def save_tokenizer(folder: Path):
    from transformers import BertTokenizerFast

    tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(dict.fromkeys(VOCAB))})
    tok.save_pretrained(folder)
    return tok


def save_tiny_bert(folder: Path, seed: int = 0) -> Path:
    """A tiny random BERT (hidden 16, one layer) with the word tokenizer, for the classifier."""
    from transformers import BertConfig, BertModel

    tok = save_tokenizer(folder)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=128)
    BertModel(config).save_pretrained(folder)
    return folder


def tiny_towers_config(tokenizer_dir: Path) -> dict:
    tok_size = len(dict.fromkeys(VOCAB))
    return towers_conf(
        encoder={"type": "gru", "pretrained": str(tokenizer_dir), "fallback": None,
                 "vocab_size": tok_size, "embedding_dim": 16, "hidden_size": 16, "dropout": 0.0,
                 "num_layers": 1},
        pooler={"type": "mean"}, projection={"dim": None, "normalize": False, "bias": False},
        sharing="sde")


def save_tiny_retriever(folder: Path, tokenizer_dir: Path, seed: int = 0) -> Path:
    """An exported tiny random dual encoder (GRU towers, cosine), as `rqa export` writes one."""
    from retrieval_qa.encoders import build_dual_towers
    from retrieval_qa.models.inference import DualEncoderInference
    from retrieval_qa.pretrained import load_tokenizer

    torch.manual_seed(seed)
    cfg = tiny_towers_config(tokenizer_dir)
    towers = build_dual_towers(cfg)
    meta = {"max_question_length": 16, "max_answer_length": 24, "answer_with_context": False,
            "pretrained": "tiny", "builder": "retrieval_qa.encoders.build_dual_towers",
            "towers": cfg, "similarity": "cosine"}
    return DualEncoderInference(towers, load_tokenizer(str(tokenizer_dir)), meta).save(folder)


class BagOfWordsRetriever:
    """A stand-in retriever: hashed bag-of-words vectors, l2-normalised (deterministic)."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim

    def _vec(self, text: str) -> torch.Tensor:
        v = torch.zeros(self.dim)
        for w in text.lower().replace("?", " ").replace(".", " ").split():
            v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        return v / v.norm().clamp(min=1e-9)

    def encode_questions(self, texts, progress=False, **_):
        return torch.stack([self._vec(t) for t in texts])

    def encode_answers(self, answers, progress=False, **_):
        return torch.stack([self._vec(getattr(a, "text", a)) for a in answers])


class HashScorer:
    """A stand-in classifier: a deterministic probability per (question, answer, context),
    counting its calls and the pairs it scored; ``fail_after`` calls raise (a crash)."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls, self.pairs, self.fail_after = 0, 0, fail_after

    def __call__(self, questions, answers, contexts):
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise RuntimeError("simulated crash")
        self.calls += 1
        self.pairs += len(questions)
        out = []
        for q, a, c in zip(questions, answers, contexts, strict=True):
            h = int(hashlib.sha256(f"{q}\0{a}\0{c}".encode()).hexdigest()[:8], 16)
            out.append(h / 0xFFFFFFFF)
        return torch.tensor(out)

    def describe(self) -> dict:
        return {"scorer": "hash stand-in"}
