"""`rqa export --format sentence-transformers`: the folder loads with SentenceTransformer
offline and gives the embeddings of `rqa encode` (max abs difference below 1e-5), for the
symmetric model (one module) and the asymmetric ones (a Router), on tiny random towers; most
here are the custom RetrievalTower module (native folders: tests/export/test_native_modules.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers import save_dual_encoder, towers_conf

pytest.importorskip("sentence_transformers")

from transformers import BertConfig, BertModel, BertTokenizerFast  # noqa: E402

from retrieval_qa.cli import main  # noqa: E402
from retrieval_qa.models.inference import DualEncoderInference  # noqa: E402

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ("the a is of what where who fact place city about question paris france capital "
         "berlin germany tower river").split()
TEXTS = [
    "what is the capital of france",
    "paris",
    "where is the tower of paris",
    "berlin is the capital of germany and the city is about the river and a fact of the place",
    "who",
    "unknownword about the question",
]
TOL = 1e-5


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    yield


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    root = tmp_path_factory.mktemp("st-export")
    vocab = SPECIALS + WORDS
    tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
    bert = root / "tiny-bert"
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=32,
                         max_position_embeddings=64)).save_pretrained(bert)
    return root, tok, len(vocab), bert


def gru_config(vocab: int, sharing: str, projection: int | None = None) -> dict:
    return towers_conf(encoder={"type": "gru", "vocab_size": vocab, "embedding_dim": 8,
                                "hidden_size": 8, "dropout": 0.0},
                       pooler={"type": "multihop_attention", "hops": 2, "attention_dim": 4},
                       projection={"dim": projection}, sharing=sharing)


def bert_config(bert: Path, sharing: str, pooler: str = "mean") -> dict:
    return towers_conf(encoder={"type": "pretrained", "pretrained": str(bert), "fallback": None},
                       pooler={"type": pooler}, projection={"dim": None}, sharing=sharing)


def rqa(*argv) -> dict:
    import io

    out = io.StringIO()
    assert main([str(a) for a in argv], stdout=out) == 0
    return json.loads(out.getvalue().strip().splitlines()[-1])


def load_st(folder: Path):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), trust_remote_code=True, device="cpu",
                               local_files_only=True)


def rqa_encode(tmp: Path, model: Path, side: str) -> torch.Tensor:
    texts = tmp / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    out = tmp / f"{side}.pt"
    rqa("encode", "--checkpoint", model, "--input", texts, "--side", side, "--output", out,
        "--quiet")
    return torch.load(out)


def max_diff(a, b) -> float:
    return float((torch.as_tensor(a) - torch.as_tensor(b)).abs().max())


def test_sde_is_one_module_with_the_embeddings_of_rqa_encode(assets, tmp_path, monkeypatch):
    """SDE with GRU token encoder and multi-hop attention pooling (a custom module)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _, tok, vocab, _ = assets
    src = save_dual_encoder(tmp_path / "src", tok, gru_config(vocab, "sde"), "cosine")
    out = rqa("export", "--format", "sentence-transformers", "--checkpoint", src,
              "--output", tmp_path / "st")
    assert out["layout"].startswith("one RetrievalTower") and out["similarity_fn_name"] == "cosine"
    assert out["modules"] == "custom" and "gru" in out["why_custom"]
    modules = json.loads((tmp_path / "st" / "modules.json").read_text())
    assert [m["type"] for m in modules] == [
        "retrieval_qa.export.sentence_transformers.RetrievalTower"]

    st = load_st(tmp_path / "st")
    q, d = st.encode_query(TEXTS, convert_to_tensor=True), st.encode_document(TEXTS,
                                                                            convert_to_tensor=True)
    assert max_diff(q, rqa_encode(tmp_path, src, "question")) < TOL
    assert max_diff(d, rqa_encode(tmp_path, src, "answer")) < TOL
    # no task: the document side (Router.for_query_document's default); cosine: unit norm
    assert max_diff(st.encode(TEXTS, convert_to_tensor=True), d) < TOL
    assert torch.allclose(q.norm(dim=-1), torch.ones(len(TEXTS)), atol=1e-5)
    assert st.similarity_fn_name == "cosine"
    assert st.get_embedding_dimension() == q.shape[1]


@pytest.mark.parametrize("variant", ["ade_spl_gru_dot", "ade_bert_cosine",
                                     "sde_bert_input_types"])
def test_asymmetric_variants_route_query_and_document(assets, tmp_path, monkeypatch, variant):
    """Two towers, or one shared tower whose sides add different input-type vectors."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _, tok, vocab, bert = assets
    if variant == "ade_spl_gru_dot":
        cfg, similarity = gru_config(vocab, "ade_spl", projection=6), "dot"
    elif variant == "ade_bert_cosine":
        cfg, similarity = bert_config(bert, "ade"), "cosine"
    else:
        cfg, similarity = bert_config(bert, "sde"), "cosine"
        cfg["encoder"]["input_types"] = True
    src = save_dual_encoder(tmp_path / "src", tok, cfg, similarity)
    out = rqa("export", "--format", "sentence-transformers", "--checkpoint", src,
              "--output", tmp_path / "st")
    assert out["layout"].startswith("Router") and out["sharing"] == cfg["sharing"]
    # a pretrained encoder with mean pooling is sentence-transformers' own modules (also
    # tested without retrieval_qa in tests/export/test_native_modules.py)
    assert out["modules"] == ("native" if variant == "ade_bert_cosine" else "custom")
    modules = json.loads((tmp_path / "st" / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Router"]

    st = load_st(tmp_path / "st")
    q = st.encode_query(TEXTS, convert_to_tensor=True)
    d = st.encode_document(TEXTS, convert_to_tensor=True)
    ref_q, ref_d = rqa_encode(tmp_path, src, "question"), rqa_encode(tmp_path, src, "answer")
    assert max_diff(q, ref_q) < TOL and max_diff(d, ref_d) < TOL
    assert max_diff(st.encode(TEXTS, task="query", convert_to_tensor=True), ref_q) < TOL
    assert max_diff(q, d) > 1e-3  # two different towers (or type vectors) really are used
    assert st.similarity_fn_name == similarity
    # the scores sentence-transformers computes are the retrieval scores of the suite
    scores = st.similarity(q, d)
    assert max_diff(scores, ref_q @ ref_d.T) < 1e-4


def test_answers_with_context_take_sentence_context_pairs(assets, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _, tok, _, bert = assets
    src = save_dual_encoder(tmp_path / "src", tok, bert_config(bert, "sde", pooler="cls"), "cosine",
                     answer_with_context=True)
    rqa("export", "--format", "sentence-transformers", "--checkpoint", src,
        "--output", tmp_path / "st")
    st = load_st(tmp_path / "st")
    context = "paris is the capital of france and the city is about the river"
    pairs = [(t, context) for t in TEXTS]
    inference = DualEncoderInference.load(src)
    ref = inference._encode("answer", TEXTS, [context] * len(TEXTS), 12, 4, False)
    assert max_diff(st.encode_document(pairs, convert_to_tensor=True), ref) < TOL
    with pytest.raises(ValueError, match="sentence, context"):
        st.encode_document(TEXTS)


def test_vae_towers_are_rebuilt_by_their_builder(assets, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _, tok, vocab, _ = assets
    cfg = towers_conf("vae", encoder={"vocab_size": vocab, "embedding_dim": 8, "hidden_size": 8,
                                      "dropout": 0.0},
                      pooler={"hops": 2, "attention_dim": 4}, sharing="ade", latent_dim=5)
    src = save_dual_encoder(tmp_path / "src", tok, cfg, "cosine",
                     builder="retrieval_qa.encoders.vae.towers_from_config")
    rqa("export", "--format", "sentence-transformers", "--checkpoint", src,
        "--output", tmp_path / "st")
    spec = json.loads((tmp_path / "st" / "query_0_RetrievalTower" / "rqa_tower.json")
                      .read_text())["spec"]
    assert spec["kind"] == "builder"
    st = load_st(tmp_path / "st")
    assert max_diff(st.encode_query(TEXTS, convert_to_tensor=True),
                    rqa_encode(tmp_path, src, "question")) < TOL
    assert max_diff(st.encode_document(TEXTS, convert_to_tensor=True),
                    rqa_encode(tmp_path, src, "answer")) < TOL


def test_export_command_rejects_inconsistent_arguments(assets, tmp_path, capsys):
    _, tok, vocab, _ = assets
    src = save_dual_encoder(tmp_path / "src", tok, gru_config(vocab, "sde"), "cosine")
    assert main(["export", "--checkpoint", str(src), "--output", str(tmp_path / "x")]) == 2
    assert "--format sentence-transformers" in capsys.readouterr().err
    assert main(["export", "--format", "sentence-transformers", "--checkpoint", str(src),
                 "--output", str(tmp_path / "x"), "experiment=sde"]) == 2
    assert "no experiment settings" in capsys.readouterr().err
