"""Fixtures of the analysis tests: a synthetic SQuAD data dir whose dev pool has answers shared
by many questions, a word-level tokenizer, tiny random GRU towers (a dual encoder and an ENDX
model, one epoch each) and a tiny random BERT for BERTQA. Everything runs on one torch thread
(on a busy 2-core machine, two threads are ~100x slower for these tiny models)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers import WORDS, synthetic_squad, tiny_overrides, write_json_gz
from transformers import BertConfig, BertModel, BertTokenizerFast

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def one_to_many_squad(n_other: int = 6) -> dict:
    """Paragraph 0: sentence 0 asked by 9 questions, sentence 1 by 3, sentence 2 by 1; then
    ``n_other`` paragraphs of 3 sentences with one question each on sentences 0 and 1."""
    paragraphs = []
    for p in range(1 + n_other):
        parts = [f"Fact {k} of place {p} is about the city number {p * 10 + k}." for k in range(3)]
        context = " ".join(parts)
        starts = [context.index(s) for s in parts]
        counts = (9, 3, 1) if p == 0 else (1, 1, 0)
        qas = [{"id": f"p{p}s{k}q{j}",
                "question": f"What is fact {k} of place {p} (form {j})?",
                "answers": [{"answer_start": starts[k] + 5, "text": str(k)}]}
               for k in range(3) for j in range(counts[k])]
        paragraphs.append({"context": context, "qas": qas})
    return {"version": "1.1", "data": [{"title": "OneToMany", "paragraphs": paragraphs}]}


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    yield


def _tiny_train(root: Path, vocab: int, experiment: str, out: Path) -> dict:
    from retrieval_qa.training.compose import compose_traced
    from retrieval_qa.training.run import train

    extra = ["model.cross.cross_attention.num_heads=2"] if experiment.startswith("endx") else []
    # the later experiment= and max_epochs= win over tiny_overrides' own
    return train(compose_traced(tiny_overrides((root, vocab), out, f"experiment={experiment}",
                                               "trainer.max_epochs=1", *extra)))


@pytest.fixture(scope="session")
def env(tmp_path_factory):
    """Data, tokenizer, trained tiny models (exported folders and run reports), tiny BERT."""
    root = tmp_path_factory.mktemp("analysis")
    write_json_gz(root / "data" / "squad" / "train-v1.1.json.gz", synthetic_squad())
    write_json_gz(root / "data" / "squad" / "dev-v1.1.json.gz", one_to_many_squad())
    vocab = SPECIALS + WORDS + [str(i) for i in range(10)] + ["form", "fact", "(", ")", "?", "."]
    tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
    tok.save_pretrained(root / "tokenizer")
    bert = root / "tiny-bert"
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32,
                        max_position_embeddings=64)
    BertModel(config).save_pretrained(bert)
    tok.save_pretrained(bert)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RQA_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "rqa-cache"))
        dual = _tiny_train(root, len(vocab), "dual_gru", root / "runs")
        endx = _tiny_train(root, len(vocab), "endx_gru", root / "runs")
    torch.set_num_threads(before)
    return SimpleNamespace(root=root, data=root / "data", bert=bert, dual=dual, endx=endx,
                           endx_run=Path(endx["checkpoint"]).parent)


@pytest.fixture
def rqa(capsys):
    """Run ``rqa`` in-process, assert success, return the JSON object of the last stdout line."""
    import json

    from retrieval_qa.cli import main

    def run(*argv) -> dict:
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        assert code == 0, captured.err[-3000:]
        return json.loads(captured.out.strip().splitlines()[-1])

    return run


@pytest.fixture
def assert_png():
    def check(path) -> None:
        data = Path(path).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000, path

    return check
