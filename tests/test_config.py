"""retrieval_qa.config: model_defaults follows the config search path of the moment."""

from __future__ import annotations

from retrieval_qa.config import model_defaults


def test_model_defaults_follow_a_later_conf_path(tmp_path, monkeypatch):
    """A value read once is cached, but not across search paths: a folder put first on
    ``$RQA_CONF_PATH`` afterwards is read, and dropping it gives the packaged value again."""
    monkeypatch.delenv("RQA_CONF_PATH", raising=False)
    packaged = model_defaults("bm25")
    assert model_defaults("bm25") == packaged  # served from the cache
    mine = tmp_path / "conf" / "model"
    mine.mkdir(parents=True)
    (mine / "bm25.yaml").write_text("k1: 7.5\nb: 0.25\n")
    monkeypatch.setenv("RQA_CONF_PATH", str(tmp_path / "conf"))
    assert (model_defaults("bm25")["k1"], model_defaults("bm25")["b"]) == (7.5, 0.25)
    assert model_defaults("bm25")["k1"] != packaged["k1"]
    monkeypatch.delenv("RQA_CONF_PATH")
    assert model_defaults("bm25") == packaged
