"""Every notebook of notebooks/ executes (papermill, the `notebooks` extra) on tiny models made
here, with parameters pointing at them, so a broken API breaks a test; each shows figures."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import towers_conf

papermill = pytest.importorskip("papermill")
pytest.importorskip("ipykernel")

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory):
    """The kernel inherits the environment: this checkout first, offline, one thread."""
    cache = tmp_path_factory.mktemp("nb-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join(
            [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("OMP_NUM_THREADS", "1")
        mp.setenv("MPLCONFIGDIR", str(cache / "matplotlib"))
        mp.setenv("RQA_CACHE_DIR", str(cache / "rqa"))
        yield


def run(name: str, out_dir: Path, **parameters) -> dict:
    out = out_dir / name
    papermill.execute_notebook(str(NOTEBOOKS / name), str(out), parameters=parameters,
                               cwd=str(NOTEBOOKS), kernel_name="python3", progress_bar=False,
                               execution_timeout=120)
    nb = json.loads(out.read_text())
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    return {"images": sum("image/png" in o.get("data", {}) for o in outputs),
            "text": "".join(o.get("text", "") if isinstance(o.get("text"), str)
                            else "".join(o.get("text", [])) for o in outputs)}


def tiny_exports(root: Path, tokenizer_dir: Path) -> dict[str, str]:
    import torch
    from transformers import AutoTokenizer

    from retrieval_qa.encoders import build_dual_towers
    from retrieval_qa.models.inference import DualEncoderInference

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    vocab = max(tok.get_vocab().values()) + 1
    models = {}
    for name, sharing, dim in (("SDE", "sde", None), ("ADE", "ade", None),
                               ("ADE-SPL", "ade_spl", 6)):
        cfg = towers_conf(encoder={"type": "gru", "vocab_size": vocab, "embedding_dim": 8,
                                   "hidden_size": 8, "dropout": 0.0},
                          pooler={"type": "multihop_attention", "hops": 2, "attention_dim": 4},
                          projection={"dim": dim}, sharing=sharing)
        torch.manual_seed(0)
        meta = {"max_question_length": 16, "max_answer_length": 24,
                "answer_with_context": False, "builder": "retrieval_qa.encoders.build_dual_towers",
                "towers": cfg, "similarity": "cosine"}
        models[name] = str(DualEncoderInference(build_dual_towers(cfg), tok, meta)
                           .save(root / sharing))
    return models


def test_every_notebook_is_executed_here():
    assert {p.name for p in NOTEBOOKS.glob("*.ipynb")} == {
        "tower_tsne.ipynb", "endx_similarity.ipynb", "results_overview.ipynb",
        "compare_methods.ipynb"}


def _cells(name: str) -> list[dict]:
    return json.loads((NOTEBOOKS / name).read_text())["cells"]


@pytest.mark.parametrize("name", sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")))
def test_the_parameters_cell_is_the_one_that_counts(name):
    """One cell tagged ``parameters`` (papermill injects its own cell after it when run with
    parameters), and no committed ``injected-parameters`` cell that would set them again, so
    editing the parameters cell and running all changes what runs."""
    tags = [c.get("metadata", {}).get("tags", []) for c in _cells(name)]
    assert sum("parameters" in t for t in tags) == 1
    assert not any("injected-parameters" in t for t in tags)
    nb = json.loads((NOTEBOOKS / name).read_text())
    assert not nb["metadata"].get("papermill", {}).get("parameters")


def _parameters(name: str) -> dict:
    cell = next(c for c in _cells(name) if "parameters" in c.get("metadata", {}).get("tags", []))
    values: dict = {}
    exec("".join(cell["source"]), {}, values)  # noqa: S102 - the repository's own cell
    return values


def test_default_inputs_are_what_make_notebook_inputs_makes():
    """A fresh clone: the defaults point at `make notebook-inputs`' folders, which the Makefile
    writes (the committed outputs were made from them)."""
    makefile = (REPO / "Makefile").read_text()
    assert "NB_RUNS = runs/notebooks" in makefile
    for folder in _parameters("tower_tsne.ipynb")["MODELS"].values():
        assert folder.startswith("../runs/notebooks/off_the_shelf/")
    endx = _parameters("endx_similarity.ipynb")
    assert endx["ENDX_RUN"] == "../runs/notebooks/brief/endx_gru/cpu-seed1"
    for name in ("compare_methods.ipynb", "results_overview.ipynb"):  # committed files
        for value in _parameters(name).values():
            if isinstance(value, str) and value.startswith("../"):
                assert (NOTEBOOKS / value).exists(), (name, value)


@pytest.mark.parametrize("name, parameters", [
    ("tower_tsne.ipynb", {"MODELS": {"SDE": "no-such-folder"}}),
    ("endx_similarity.ipynb", {"ENDX_RUN": "no-such-run", "DUAL_MODEL": "no-such-model"}),
])
def test_missing_inputs_stop_with_the_command_that_makes_them(name, parameters, tmp_path,
                                                              kernel_env):
    with pytest.raises(papermill.PapermillExecutionError) as e:
        run(name, tmp_path, **parameters)
    assert "make notebook-inputs" in str(e.value) and "no-such" in str(e.value)


def test_tower_tsne_runs_on_tiny_exports(env, tmp_path, kernel_env):
    models = tiny_exports(tmp_path / "models", env.root / "tokenizer")
    out = run("tower_tsne.ipynb", tmp_path, MODELS=models, LABEL="tiny random",
              DATA_DIR=str(env.data), SAMPLE=20)
    assert out["images"] == 1 and "20 QA pairs" in out["text"]


def test_endx_similarity_runs_on_tiny_runs(env, tmp_path, kernel_env):
    out = run("endx_similarity.ipynb", tmp_path, ENDX_RUN=str(env.endx_run),
              DUAL_MODEL=env.dual["checkpoint"], DATA_DIR=str(env.data), LABEL="tiny",
              MAX_QUESTIONS=5, TSNE_QUESTIONS=4, OUTPUT_DIR=str(tmp_path / "figures"))
    assert out["images"] == 2
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == [
        "figure3_tiny.json", "figure3_tiny.png", "figure4_tiny.json", "figure4_tiny.png"]


def test_results_overview_runs_on_a_results_folder(env, tmp_path, kernel_env):
    """Table 2 from a training report and the Dual-GRUs seed reference that
    conf/tables/endx_table2.yaml declares (per-question records, today's pools); the old pools'
    side_by_side.json in a table of its own."""
    results = tmp_path / "results"
    (results / "endx" / "records").mkdir(parents=True)
    shutil.copy2(REPO / "results" / "endx" / "side_by_side.json", results / "endx")
    for seed in (1, 2, 3):
        shutil.copy2(REPO / "results" / "endx" / "records" /
                     f"dual_gru_seed{seed}.questions.jsonl.gz", results / "endx" / "records")
    (results / "tiny").mkdir()
    (results / "tiny" / "result.json").write_text(json.dumps(env.dual))
    out = run("results_overview.ipynb", tmp_path, RESULTS_DIR=str(results))
    assert out["images"] == 2 and "2 tables" in out["text"]
    nb = json.loads((tmp_path / "results_overview.ipynb").read_text())
    shown = "".join("".join(o.get("data", {}).get("text/markdown", []))
                    for c in nb["cells"] for o in c.get("outputs", []))
    assert "| 20.58 ± 0.95 | 3 | 55.24 | endx/records/dual_gru_seed{1,2,3}" in shown
    assert "[old pools] | mrr | 21.26 ± 1.05 | 3 | 55.24 | endx/side_by_side.json |" in shown


def test_compare_methods_runs_on_tiny_synthetic_records(tmp_path, kernel_env):
    import numpy as np

    from retrieval_qa.data.types import Candidate, RetrievalPool
    from retrieval_qa.evaluation.per_question import write_per_question

    n = 60
    pool = RetrievalPool("toy", "dev", [Candidate(f"c{i}", "w " * (5 + i), f"d{i}", "x")
                                        for i in range(n)],
                         [f"{('What', 'Who', 'In')[i % 3]} is {i}?" for i in range(n)],
                         [[i] for i in range(n)])
    rng = np.random.default_rng(0)
    paths = []
    for name, shift in (("a", 0.0), ("b", 0.4)):
        ranks = rng.integers(1, 8, n).astype(float)
        ranks[rng.random(n) < shift] = 1.0
        paths.append(str(write_per_question(tmp_path / f"{name}.jsonl.gz", pool, ranks, ranks, (1, 5, 10))))
    out = run("compare_methods.ipynb", tmp_path, A=paths[0], B=paths[1], NAME_A="tiny A",
              NAME_B="tiny B", SAMPLES=200, PERMUTATIONS=500)
    assert out["images"] == 2 and "60 questions, toy/dev" in out["text"]
