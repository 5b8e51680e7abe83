"""Reader for MRQA 2019 shared-task files (jsonl.gz: a header line, then one context a line).

``detected_answers[].char_spans`` are inclusive ``[start, end]``; they are turned into
end-exclusive spans here, once, so nothing downstream has to remember the convention.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DataFormatError
from .io import iter_json_lines
from .read_report import ReadReport


@dataclass(frozen=True)
class MrqaQuestion:
    """One question of an MRQA context.

    Attributes:
        qid: its id.
        question: its text.
        spans: the end-exclusive character spans of its detected answers.
    """
    qid: str
    question: str
    spans: tuple[tuple[int, int], ...]  # end-exclusive character spans of detected answers


@dataclass(frozen=True)
class MrqaContext:
    """One line of an MRQA file: a context and its questions.

    Attributes:
        context: the paragraph's text.
        qas: its questions.
        line: its line in the file.
    """
    context: str
    qas: tuple[MrqaQuestion, ...]
    line: int

    @property
    def key(self) -> str:
        """The qids of the context, in order, joined by '/' (MultiReQA's candidate-id key)."""
        return "/".join(q.qid for q in self.qas)


def _get(obj: Any, key: str, kind: type, path: Path, record: str) -> Any:
    if not isinstance(obj, dict) or key not in obj or not isinstance(obj[key], kind):
        got = "missing" if not isinstance(obj, dict) or key not in obj else type(obj[key]).__name__
        raise DataFormatError(path, record, f"key {key!r} should be {kind.__name__} ({got})",
                              "the file must follow the MRQA 2019 jsonl layout")
    return obj[key]


def read_mrqa(path: str | Path, strict: bool = True
              ) -> tuple[dict, list[MrqaContext], ReadReport]:
    """Read an MRQA file; returns (header, contexts, report of skipped records).

    Args:
        path: the MRQA file (jsonl or jsonl.gz).
        strict: a malformed record is an error; False: it is skipped and listed in the report.
    """
    path = Path(path)
    report = ReadReport(str(path))
    header: dict = {}
    contexts: list[MrqaContext] = []
    seen: dict[str, int] = {}
    for lineno, obj in iter_json_lines(path):
        if lineno == 1 and isinstance(obj, dict) and "header" in obj:
            header = obj["header"]
            continue
        record = f"line {lineno}"
        try:
            context = _get(obj, "context", str, path, record)
            raw_qas = _get(obj, "qas", list, path, record)
        except DataFormatError as e:
            report.add(e, strict)
            continue
        qas = []
        for k, qa in enumerate(raw_qas):
            qrec = f"{record}, qas[{k}]"
            try:
                qid = _get(qa, "qid", str, path, qrec)
                qrec = f"{record}, qid {qid!r}"
                question = _get(qa, "question", str, path, qrec)
                spans = []
                for da in _get(qa, "detected_answers", list, path, qrec):
                    for span in _get(da, "char_spans", list, path, qrec):
                        if (not isinstance(span, list) or len(span) != 2
                                or not 0 <= span[0] <= span[1] < len(context)):
                            raise DataFormatError(
                                path, qrec,
                                f"char_span {span} lies outside the context "
                                f"(length {len(context)}; MRQA spans are inclusive)",
                                "fix the span or drop the question")
                        spans.append((span[0], span[1] + 1))
                if qid in seen:
                    raise DataFormatError(path, qrec, f"duplicate qid, first on line {seen[qid]}",
                                          "give every question a unique qid")
            except DataFormatError as e:
                report.add(e, strict)
                continue
            seen[qid] = lineno
            qas.append(MrqaQuestion(qid, question, tuple(spans)))
        contexts.append(MrqaContext(context, tuple(qas), lineno))
    return header, contexts, report
