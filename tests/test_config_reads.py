"""retrieval_qa.config reads each config file once per composition: an experiment's, whatever
its parents, groups and shared profiles share, and a pipeline's, with its stages' settings;
where each value came from is recorded while merging, so saying it reads nothing. The reads
are counted through the package's one YAML reader (``files._parse``), patched."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from retrieval_qa.config import (
    compose_traced,
    conf_names,
    experiment_profiles,
    files,
    load_yaml,
    reading,
)
from retrieval_qa.pipeline.composition import load_pipeline

CONF = Path(__file__).resolve().parents[1] / "conf"


@pytest.fixture
def reads(monkeypatch) -> Counter:
    """Each config file's parses from here on, by path."""
    counts: Counter = Counter()
    parse = files._parse

    def counting(path):
        counts[Path(path).resolve().as_posix()] += 1
        return parse(path)

    monkeypatch.setattr(files, "_parse", counting)
    return counts


def _widest_profile(profiles: list[str]) -> str:
    """The profile that merges the most files (a gpu block often extends a shared file that
    extends another)."""
    return next((p for p in ("gpu", "cpu") if p in profiles), profiles[-1])


@pytest.mark.parametrize("experiment", sorted(experiment_profiles()))
def test_an_experiment_reads_each_file_once(experiment, reads):
    profile = _widest_profile(experiment_profiles()[experiment])
    composed = compose_traced([f"experiment={experiment}", f"profile={profile}"])
    assert reads, "the patched reader saw no read"
    assert {path: n for path, n in reads.items() if n > 1} == {}
    assert (CONF / "experiment" / f"{experiment}.yaml").resolve().as_posix() in reads
    reads.clear()
    assert composed.sources() and not reads  # recorded while merging: nothing read again


@pytest.mark.parametrize("name", conf_names("pipeline"))
def test_a_pipeline_reads_each_file_once(name, reads):
    pipeline = load_pipeline(name)
    assert {path: n for path, n in reads.items() if n > 1} == {}
    assert (CONF / "pipeline" / f"{name}.yaml").resolve().as_posix() in reads
    reads.clear()
    assert pipeline.annotated() and not reads


def test_the_read_scope_ends_with_the_composition_and_hands_out_copies(reads):
    load_yaml("model/bm25.yaml")
    load_yaml("model/bm25.yaml")
    assert reads[(CONF / "model" / "bm25.yaml").resolve().as_posix()] == 2  # no scope: no cache
    with reading():
        first = load_yaml("model/bm25.yaml")
        first.k1 = 99.0
        again = load_yaml("model/bm25.yaml")
    assert again.k1 != 99.0  # a copy of the first parse, not the parse itself
    assert reads[(CONF / "model" / "bm25.yaml").resolve().as_posix()] == 3
