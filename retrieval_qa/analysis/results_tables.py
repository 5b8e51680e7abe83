"""The tables of what ``results/`` establishes, rendered from the claims
(:mod:`.claims`) and the ledger of test-pool looks, between ``<!-- claims:NAME -->`` and
``<!-- /claims -->`` markers of the study READMEs, README.md and docs/results.md
(``rqa results``); and the check that no figure outside them lacks a record."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from .claims import (
    CLAIMS_FILE,
    LEDGER,
    Claim,
    Study,
    compute,
    ledger_pool,
    load_studies,
    looks_text,
    pool_text,
    read_record,
)

BLOCK = re.compile(r"(<!-- claims:(?P<name>[\w./:-]+) -->\n)(?P<body>.*?)(<!-- /claims -->)",
                   re.S)
#: the most words of a study's summary in README.md's table
SUMMARY_WORDS = 40


def _link(claim: Claim, base: Path) -> str:
    names = []
    for p in claim.files():
        rel = os.path.relpath(p, base)
        names.append(f"[{p.name}]({rel})")
    if len(names) > 3:
        return ", ".join(names[:2]) + f" and {len(names) - 2} more"
    return ", ".join(names)


def ledger_entries(results: Path) -> list[dict]:
    """The looks of the committed ledger (``results/ledger.jsonl``; none when it is absent).

    Args:
        results: the ``results/`` folder.
    """
    from ..evaluation.ledger import read

    path = Path(results) / LEDGER
    return read(path) if path.is_file() else []


def ledger_looks(entries: list[dict]) -> dict[tuple, int]:
    """``{(family, pool): configurations}`` of ledger looks, the pool as ``dataset/pool``
    (``+ " (subset)"`` for looks at a subset).

    Args:
        entries: the looks (:func:`ledger_entries`).
    """
    from ..evaluation.ledger import summarise

    return {(r["family"], r["pool"]): r["configurations"] for r in summarise(entries)}


def kept_looks(studies: list[Study]) -> dict[str, str]:
    """``{ranks digest: the claims}`` of the per-question records the studies' claims keep
    (a record kept by several claims names them all).

    Args:
        studies: the studies (:func:`load_studies`).
    """
    from ..evaluation.ledger import ranks_digest

    kept: dict[str, set[str]] = {}
    for study in studies:
        for claim in study.claims:
            for path in claim.files():
                if path.name.endswith(".jsonl.gz"):
                    kept.setdefault(ranks_digest(read_record(path).ranks), set()).add(claim.key)
    return {digest: ", ".join(sorted(keys)) for digest, keys in kept.items()}


def study_table(study: Study, base: Path, looks: dict) -> str:
    """The study's table of established figures.

    Args:
        study: the study.
        base: the folder of the page the table goes in (links are relative to it).
        looks: :func:`ledger_looks`.
    """
    lines = ["| what | figure | seeds | pool | chosen by (validation) | test looks | command "
             "| record |", "|---|---|---|---|---|---|---|---|"]
    for c in study.claims:
        fig = compute(c)
        seeds = ", ".join(map(str, c.seeds)) or "–"
        goal = f" ({c.goal})" if c.goal else ""
        lines.append(f"| {c.what}{goal} | {fig.text} | {seeds} | {pool_text(c, fig)} | "
                     f"{c.rule or '–'} | {looks_text(c, fig, looks)} | "
                     f"{'`' + c.command + '`' if c.command else '–'} | {_link(c, base)} |")
    return "\n".join(lines) + "\n"


def looks_table(entries: list[dict], family: str, kept: set[str]) -> str:
    """Every configuration of ``family`` evaluated on a test pool (from the committed ledger):
    its seeds, the mean MRR of its looks, and whether a headline keeps it.

    Args:
        entries: the committed ledger's looks (:func:`ledger_entries`).
        family: the ledger family.
        kept: the ranks digests of the records the claims keep (:func:`kept_looks`).
    """
    groups: dict[tuple, list[dict]] = {}
    for e in entries:
        if e["family"] == family:
            pool = ledger_pool(f"{e['dataset']}/{e['pool']}", bool(e.get("subset")))
            label = e.get("config") or " ".join([e["name"], *e.get("overrides", [])])
            groups.setdefault((pool, label), []).append(e)
    if not groups:
        raise ValueError(f"family {family!r} has no look in results/{LEDGER}")
    lines = [f"| test pool | configuration ({family}) | seeds | looks | MRR (mean of the "
             "looks) | kept |", "|---|---|---|---|---|---|"]
    for (pool, label), group in sorted(groups.items()):
        mrrs = [e["metrics"]["mrr"] for e in group if "mrr" in e["metrics"]]
        seeds = sorted({str(e["seed"]) for e in group if e.get("seed") is not None})
        mark = "yes" if any(e.get("ranks") in kept for e in group) else ""
        mrr = f"{np.mean(mrrs):.2f}" if mrrs else "–"
        lines.append(f"| {pool} | {label} | {', '.join(seeds) or '–'} | {len(group)} | "
                     f"{mrr} | {mark} |")
    return "\n".join(lines) + "\n"


def summary_text(study: Study) -> str:
    """The study's one-line summary with each ``{claim id}`` replaced by its figure.

    Args:
        study: the study.
    """
    figures = {c.id: compute(c).text for c in study.claims}
    where = f"results/{study.folder.name}/{CLAIMS_FILE}"
    try:
        text = study.summary.format(**figures)
    except KeyError as e:
        raise ValueError(f"{where}: the summary names {e}, which is no claim's id") from None
    if len(text.split()) > SUMMARY_WORDS:
        raise ValueError(f"{where}: the summary has {len(text.split())} words; README.md's "
                         f"table takes {SUMMARY_WORDS} at most (fix: shorten it)")
    return text


def overview_table(studies: list[Study], base: Path) -> str:
    """README.md's results table: one row a study, its summary and a link.

    Args:
        studies: the studies, in order.
        base: the folder of the page the table goes in.
    """
    lines = ["| study | established | details |", "|---|---|---|"]
    for s in studies:
        rel = os.path.relpath(s.folder / "README.md", base)
        lines.append(f"| {s.title} | {summary_text(s)} | [{rel}]({rel}) |")
    return "\n".join(lines) + "\n"


def pages(results: Path, repo: Path) -> list[Path]:
    """The pages that may hold generated blocks: README.md, every page under docs/ and each
    study's README.

    Args:
        results: the ``results/`` folder.
        repo: the repository.
    """
    return [repo / "README.md", *sorted((repo / "docs").rglob("*.md")),
            *sorted(Path(results).glob("*/README.md"))]


def blocks(results: Path, repo: Path) -> dict[Path, dict[str, str]]:
    """``{file: {block name: rendered text}}`` of every block the pages hold
    (``overview``, a study's name, ``looks:FAMILY``), links relative to each page; each
    study's README must hold its own table and README.md the overview.

    Args:
        results: the ``results/`` folder.
        repo: the repository.
    """
    studies = {s.name: s for s in load_studies(results)}
    entries = ledger_entries(results)
    looks = ledger_looks(entries)
    kept = set(kept_looks(list(studies.values())))
    out: dict[Path, dict[str, str]] = {}
    for page in pages(results, repo):
        if not page.is_file():
            continue
        names = [m.group("name") for m in BLOCK.finditer(page.read_text(encoding="utf-8"))]
        if page.name == "README.md" and page.parent.name in studies:
            names.append(page.parent.name)
        if page == repo / "README.md":
            names.append("overview")
        for name in dict.fromkeys(names):
            out.setdefault(page, {})[name] = _block(name, studies, looks, entries, kept,
                                                    page.parent)
    return out


def _block(name: str, studies: dict, looks: dict, entries: list[dict], kept: set[str],
           base: Path) -> str:
    if name == "overview":
        return overview_table(list(studies.values()), base)
    if name.startswith("looks:"):
        return looks_table(entries, name.split(":", 1)[1], kept)
    if name not in studies:
        raise ValueError(f"<!-- claims:{name} -->: no study {name!r} (results/*/claims.yaml) "
                         "and not 'overview' or 'looks:FAMILY'")
    return study_table(studies[name], base, looks)


def _rewrite(path: Path, rendered: dict[str, str]) -> tuple[str, list[str]]:
    """The file's text with its blocks replaced, and the names of blocks it lacks."""
    text = path.read_text(encoding="utf-8")
    found = set()

    def sub(m: re.Match) -> str:
        name = m.group("name")
        if name not in rendered:
            return m.group(0)
        found.add(name)
        return m.group(1) + rendered[name] + m.group(4)

    return BLOCK.sub(sub, text), sorted(set(rendered) - found)


def render(results: Path, repo: Path, write: bool = True) -> dict[str, list[str]]:
    """Regenerate every block; returns ``{file: [what differs]}`` (empty: all current).

    Args:
        results: the ``results/`` folder.
        repo: the repository (README.md, docs/results.md).
        write: write the files (False: only report what differs, as ``--check``).
    """
    from ..written import write_text

    diffs: dict[str, list[str]] = {}
    for path, rendered in blocks(results, repo).items():
        if not path.is_file():
            diffs[str(path.relative_to(repo))] = ["missing file"]
            continue
        new, missing = _rewrite(path, rendered)
        problems = [f"no block <!-- claims:{n} -->" for n in missing]
        if new != path.read_text(encoding="utf-8"):
            problems.append("a generated table differs from its records")
            if write:
                write_text(path, new)
        if problems:
            diffs[str(path.relative_to(repo))] = problems
    return diffs


#: a figure in prose: a decimal number, a percentage, a ratio or a duration (versions,
#: settings in code spans and links are not figures)
FIGURE = re.compile(r"(?<![\w.=/~-])[-+−]?\d+(?:,\d{3})*(?:\.\d+)?\s?(?:%|x\b|min\b|minutes\b"
                    r"|h\b|hours\b|s\b|seconds\b)|(?<![\w.=/~v-])[-+−]?\d+\.\d+(?![\w.])")


#: what precedes a version number, which is not a figure (Python 3.11, SQuAD v1.1)
VERSION = re.compile(r"(?:Python|License|[Vv]ersion|torch|CUDA|T5|v)\s?$")


def stray_figures(path: Path) -> list[str]:
    """``line: figure`` of each figure in ``path`` outside the generated blocks, code and
    links: a figure a reader sees must come from a record.

    Args:
        path: a markdown file (README.md, docs/results.md, a study's README).
    """
    text = BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), path.read_text(encoding="utf-8"))
    text = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = re.sub(r"`[^`]*`", "", line)
        line = re.sub(r"\]\([^)]*\)", "]", line)  # link targets
        line = re.sub(r"<!--.*?-->", "", line)
        out += [f"{n}: {m.group(0).strip()}" for m in FIGURE.finditer(line)
                if not VERSION.search(line[:m.start()])]
    return out
