"""docs/cli-reference.md is what the parsers say now (regenerate: `make docs`)."""

from __future__ import annotations

from pathlib import Path

from retrieval_qa.cli.reference import reference

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli-reference.md"


def test_the_committed_reference_is_up_to_date():
    assert DOC.read_text() == reference(), (
        "docs/cli-reference.md is out of date: run `make docs` "
        "(python -m retrieval_qa.cli.reference > docs/cli-reference.md)")


def test_every_subcommand_has_a_section():
    text = DOC.read_text()
    for name in ("rqa evaluate", "rqa train", "rqa data stats", "rqa analyze side-by-side"):
        assert f"## `{name}`" in text
