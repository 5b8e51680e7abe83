"""`rqa export --format sentence-transformers` with sentence-transformers' own modules: towers
of a pretrained encoder (BERT, the T5 encoder) with mean or CLS pooling and a projection load
with a plain `SentenceTransformer(path)` in a Python that cannot import retrieval_qa, and give
the embeddings of the suite on both sides; other towers keep the custom module and say why."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import torch
from helpers import (
    WORDS,
    save_dual_encoder,
    save_tiny_bert_model,
    save_tiny_t5,
    towers_conf,
    word_tokenizer,
)

pytest.importorskip("sentence_transformers")

from retrieval_qa.cli import main  # noqa: E402
from retrieval_qa.models.artifact import load_artifact  # noqa: E402
from retrieval_qa.requirements import release  # noqa: E402

TEXTS = ["what is the city", "the fact", "where is a place",
         "the city is a place of fact and the question is about where the city is " * 3, "who"]
TOL = 1e-5
REPO = Path(__file__).resolve().parents[2]

#: runs in a fresh `python -I` (no PYTHONPATH, no cwd on the path) that cannot import
#: retrieval_qa: loads each folder with a plain SentenceTransformer(path) and saves its
#: embeddings of the texts (query, document, no task) and what it loaded
CHILD = r"""
import json, sys, torch

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "retrieval_qa":
            raise ModuleNotFoundError(f"{name} is blocked in this test")

sys.meta_path.insert(0, Block())
try:
    import retrieval_qa  # noqa: F401
    sys.exit("retrieval_qa was importable")
except ModuleNotFoundError:
    pass
torch.set_num_threads(1)
from sentence_transformers import SentenceTransformer

job = json.loads(sys.argv[1])
out = {}
for name, folder in job["folders"].items():
    model = SentenceTransformer(folder, device="cpu", local_files_only=True)
    out[name] = {"query": model.encode_query(job["texts"], convert_to_tensor=True),
                 "document": model.encode_document(job["texts"], convert_to_tensor=True),
                 "none": model.encode(job["texts"], convert_to_tensor=True),
                 "similarity": model.similarity_fn_name,
                 "types": [type(m).__name__ for m in model.modules()]}
torch.save(out, job["output"])
"""


def rqa(*argv) -> dict:
    out = io.StringIO()
    assert main([str(a) for a in argv], stdout=out) == 0
    return json.loads(out.getvalue().strip().splitlines()[-1])


def bert(path: Path, sharing: str, pooler: str = "mean", projection: dict | None = None) -> dict:
    return towers_conf(encoder={"type": "pretrained", "pretrained": str(path), "fallback": None},
                       pooler={"type": pooler}, projection=projection or {"dim": None},
                       sharing=sharing)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("st-native")
    tok = word_tokenizer(WORDS)
    save_tiny_bert_model(root / "bert", tok, hidden=16, layers=1)
    save_tiny_t5(root / "t5", tok, d_model=16)
    return root, tok


# name: (towers config, similarity); lengths 8 (question) / 12 (answer): the long text is cut
NATIVE = {
    "sde_mean": (lambda r: bert(r / "bert", "sde"), "cosine"),
    "sde_cls_projection_dot": (
        lambda r: bert(r / "bert", "sde", "cls", {"dim": 6, "bias": True}), "dot"),
    "ade_spl_router": (lambda r: bert(r / "bert", "ade_spl", projection={"dim": 6}), "cosine"),
    "ade_t5_word_tokenizer": (lambda r: bert(r / "t5", "ade"), "cosine"),  # token types dropped
}


@pytest.fixture(scope="module")
def native(models):
    """Each NATIVE model exported; its suite embeddings; the child's embeddings."""
    root, tok = models
    exported, reference, summary = {}, {}, {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models on a busy machine (the one_thread fixture's rule)
    try:
        for name, (config, similarity) in NATIVE.items():
            src = save_dual_encoder(root / f"src-{name}", tok, config(root), similarity)
            summary[name] = rqa("export", "--format", "sentence-transformers", "--checkpoint",
                                src, "--output", root / f"st-{name}")
            exported[name] = str(root / f"st-{name}")
            suite = load_artifact(src, map_location="cpu")
            reference[name] = {"query": suite.encode_questions(TEXTS, progress=False),
                               "document": suite.encode_answers(TEXTS, progress=False)}
    finally:
        torch.set_num_threads(threads)
    job = {"folders": exported, "texts": TEXTS, "output": str(root / "child.pt")}
    run = subprocess.run([sys.executable, "-I", "-c", CHILD, json.dumps(job)], cwd=root,
                         capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
                              "HOME": str(root), "XDG_CACHE_HOME": str(root / "cache")})
    assert run.returncode == 0, run.stderr[-3000:]
    return summary, reference, torch.load(root / "child.pt"), exported


@pytest.mark.parametrize("name", sorted(NATIVE))
def test_native_folder_loads_without_retrieval_qa_and_gives_the_suite_embeddings(native, name):
    summary, reference, child, exported = native
    out, ref, got = summary[name], reference[name], child[name]
    assert out["modules"] == "native" and "why_custom" not in out
    assert out["load"] == f"SentenceTransformer({exported[name]!r})"  # no trust_remote_code
    recorded = json.loads((Path(exported[name]) / "rqa_export.json").read_text())
    assert recorded["modules"] == "native"
    modules = json.loads((Path(exported[name]) / "modules.json").read_text())
    assert all(m["type"].startswith("sentence_transformers.") for m in modules)
    for task in ("query", "document"):
        assert float((got[task] - ref[task]).abs().max()) < TOL, task
    assert float((got["none"] - ref["document"]).abs().max()) < TOL  # no task: the answer side
    assert got["similarity"] == NATIVE[name][1]
    assert float((ref["query"] - ref["document"]).abs().max()) > 1e-3  # lengths or towers differ


def test_each_layout_uses_the_modules_it_needs(native):
    types = {name: set(c["types"]) for name, c in native[2].items()}
    assert "Router" not in types["sde_mean"] and {"Transformer", "Pooling", "Normalize"} <= \
        types["sde_mean"]
    assert "Dense" in types["sde_cls_projection_dot"]
    assert "Normalize" not in types["sde_cls_projection_dot"]  # dot: raw inner products
    assert {"Router", "Dense", "Normalize"} <= types["ade_spl_router"]
    assert "T5EncoderModel" in types["ade_t5_word_tokenizer"]
    # token type ids reach the model only where the suite passes them (T5 takes none)
    from transformers import AutoTokenizer

    for name, route, wanted in (("ade_t5_word_tokenizer", "query_0_Transformer", False),
                                ("sde_mean", "", True)):
        saved = AutoTokenizer.from_pretrained(Path(native[3][name]) / route)
        assert ("token_type_ids" in saved(["the city"])) is wanted, name
    # ADE-SPL's shared projection is one Dense module, saved once for both routes (from
    # sentence-transformers 6.2; 6.0 and 6.1 write a copy per route, which embeds the same)
    routes = json.loads((Path(native[3]["ade_spl_router"]) / "router_config.json").read_text())
    query, document = routes["structure"]["query"][2], routes["structure"]["document"][2]
    if release(version("sentence-transformers")) >= (6, 2):
        assert query == document
    else:
        assert query.endswith("Dense") and document.endswith("Dense")


@pytest.mark.parametrize("case,reason", [
    ("gru", "token encoder is a gru"),
    ("input_types", "input-type vector"),
    ("context", "with their context"),
])
def test_towers_sentence_transformers_cannot_express_keep_the_custom_module(
        models, tmp_path, capsys, case, reason, one_thread):
    root, tok = models
    cfg, context = bert(root / "bert", "sde"), case == "context"
    if case == "gru":
        cfg = towers_conf(encoder={"type": "gru", "vocab_size": len(tok), "embedding_dim": 8,
                                   "hidden_size": 8, "dropout": 0.0},
                          pooler={"type": "multihop_attention", "hops": 2, "attention_dim": 4},
                          projection={"dim": None}, sharing="sde")
    elif case == "input_types":
        cfg["encoder"]["input_types"] = True
    src = save_dual_encoder(tmp_path / "src", tok, cfg, "cosine", answer_with_context=context)
    out = rqa("export", "--format", "sentence-transformers", "--checkpoint", src,
              "--output", tmp_path / "st")
    assert out["modules"] == "custom" and reason in out["why_custom"]
    assert out["load"].endswith("trust_remote_code=True)")
    modules = json.loads((tmp_path / "st" / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == [
        "Router" if case == "input_types" else "RetrievalTower"]

    assert main(["export", "--format", "sentence-transformers", "--checkpoint", str(src),
                 "--output", str(tmp_path / "st2"), "--st-modules", "native"]) == 2
    assert reason in capsys.readouterr().err  # --st-modules native: an error, not a fallback


def test_custom_module_can_be_forced(models, tmp_path, one_thread):
    root, tok = models
    src = save_dual_encoder(tmp_path / "src", tok, bert(root / "bert", "sde"), "cosine")
    out = rqa("export", "--format", "sentence-transformers", "--checkpoint", src,
              "--output", tmp_path / "st", "--st-modules", "custom")
    assert out["modules"] == "custom" and "modules='custom'" in out["why_custom"]
    modules = json.loads((tmp_path / "st" / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["RetrievalTower"]


def test_native_modules_that_embed_otherwise_fall_back(models, tmp_path, monkeypatch,
                                                       one_thread):
    """The probe texts' embeddings are compared before a native folder is written: with a
    tolerance of 0 no difference passes, and the custom module is written instead."""
    import retrieval_qa.export.sentence_transformers as export

    root, tok = models
    src = save_dual_encoder(tmp_path / "src", tok, bert(root / "bert", "sde"), "cosine")
    monkeypatch.setattr(export, "PROBE_TOL", 0.0)
    out = rqa("export", "--format", "sentence-transformers", "--checkpoint", src,
              "--output", tmp_path / "st")
    assert out["modules"] == "custom" and "other query embeddings" in out["why_custom"]
