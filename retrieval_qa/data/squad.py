"""Reader for SQuAD v1.1-format JSON (plain or .gz), validated record by record."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DataFormatError
from .io import load_json
from .read_report import ReadReport


@dataclass(frozen=True)
class SquadAnswer:
    """One answer of a SQuAD question.

    Attributes:
        start: its first character in the paragraph.
        text: its text.
    """
    start: int
    text: str


@dataclass(frozen=True)
class SquadQuestion:
    """One question of a SQuAD paragraph.

    Attributes:
        id: its id.
        question: its text.
        answers: its answers.
    """
    id: str
    question: str
    answers: tuple[SquadAnswer, ...]


@dataclass(frozen=True)
class SquadParagraph:
    """One paragraph of a SQuAD file with its questions.

    Attributes:
        title: its article's title.
        index: its position within its article.
        context: its text.
        qas: its questions.
    """
    title: str
    index: int  # position of the paragraph within its article
    context: str
    qas: tuple[SquadQuestion, ...]


def _require(obj: Any, key: str, kind: type, path: Path, record: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise DataFormatError(path, record, f"missing key {key!r}",
                              "the file must follow the SQuAD v1.1 layout")
    value = obj[key]
    if not isinstance(value, kind):
        raise DataFormatError(path, record, f"{key!r} should be {kind.__name__}, got "
                              f"{type(value).__name__}", "the file must follow the SQuAD v1.1 layout")
    return value


def _question(qa: Any, context: str, path: Path, record: str) -> SquadQuestion:
    qid = _require(qa, "id", str, path, record)
    record = f"question id {qid!r} at {record}"
    question = _require(qa, "question", str, path, record)
    if not question.strip():
        raise DataFormatError(path, record, "empty question text", "remove the question")
    answers = []
    for k, ans in enumerate(_require(qa, "answers", list, path, record)):
        arec = f"{record}, answer {k}"
        start = _require(ans, "answer_start", int, path, arec)
        text = _require(ans, "text", str, path, arec)
        if not 0 <= start < len(context) or context[start:start + len(text)] != text:
            found = context[start:start + len(text)] if 0 <= start < len(context) else "<outside>"
            raise DataFormatError(
                path, arec,
                f"answer_start {start} does not point at the answer text {text!r} "
                f"(context there reads {found!r})",
                "set answer_start to the offset of the answer in the context",
            )
        answers.append(SquadAnswer(start, text))
    if not answers:
        raise DataFormatError(path, record, "question has no answers",
                              "SQuAD v1.1 questions need at least one answer")
    return SquadQuestion(qid, question, tuple(answers))


def parse_squad(data: Any, path: str | Path = "<memory>", strict: bool = True
                ) -> tuple[list[SquadParagraph], ReadReport]:
    """Validate a parsed SQuAD object. Returns (paragraphs, report of skipped records).

    Args:
        data: the parsed JSON.
        path: the file it came from, for the errors.
        strict: raise on the first bad record; False: skip bad questions (or whole paragraphs
            whose context is unusable) and list them in the report.
    """
    path = Path(path)
    report = ReadReport(str(path))
    articles = _require(data, "data", list, path, "top level")
    paragraphs: list[SquadParagraph] = []
    seen_ids: dict[str, str] = {}
    for a, article in enumerate(articles):
        arec = f"data[{a}]"
        title = article.get("title", f"article-{a}") if isinstance(article, dict) else ""
        try:
            paras = _require(article, "paragraphs", list, path, arec)
        except DataFormatError as e:
            report.add(e, strict)
            continue
        for p, para in enumerate(paras):
            prec = f"data[{a}].paragraphs[{p}]"
            where = f" (title {title!r})"
            try:
                context = _require(para, "context", str, path, prec + where)
                if not context.strip():
                    raise DataFormatError(path, prec + where, "empty context",
                                          "give the paragraph its text or remove it")
                qas_raw = _require(para, "qas", list, path, prec + where)
            except DataFormatError as e:
                report.add(e, strict)
                continue
            qas = []
            for q, qa in enumerate(qas_raw):
                try:
                    question = _question(qa, context, path, f"{prec}.qas[{q}]{where}")
                    if question.id in seen_ids:
                        raise DataFormatError(
                            path, f"question id {question.id!r} at {prec}.qas[{q}]{where}",
                            f"duplicate id, first seen at {seen_ids[question.id]}",
                            "give every question a unique id",
                        )
                except DataFormatError as e:
                    report.add(e, strict)
                    continue
                seen_ids[question.id] = f"{prec}.qas[{q}]"
                qas.append(question)
            paragraphs.append(SquadParagraph(title, p, context, tuple(qas)))
    return paragraphs, report


def read_squad(path: str | Path, strict: bool = True) -> tuple[list[SquadParagraph], ReadReport]:
    """Read a SQuAD v1.1 JSON file (plain or gzip).

    Args:
        path: the file.
        strict: as :func:`parse_squad`.
    """
    return parse_squad(load_json(path), path, strict)


def squad_from_hub_rows(rows: Any) -> dict:
    """Regroup the flat rows of the hub's `rajpurkar/squad` into the SQuAD v1.1 layout.

    Args:
        rows: the hub dataset's rows (``id``, ``title``, ``context``, ``question``, ``answers``).
    """
    articles: dict[str, dict[str, list]] = {}
    for row in rows:
        paras = articles.setdefault(row["title"], {})
        paras.setdefault(row["context"], []).append({
            "id": row["id"], "question": row["question"],
            "answers": [{"answer_start": s, "text": t}
                        for s, t in zip(row["answers"]["answer_start"], row["answers"]["text"],
                                        strict=True)],
        })
    return {"version": "1.1", "data": [
        {"title": title, "paragraphs": [{"context": c, "qas": q} for c, q in paras.items()]}
        for title, paras in articles.items()
    ]}
