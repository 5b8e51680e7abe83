"""ReQA reference sentence splitter (rule based, stdlib only).

ReQA candidates are the sentences of SQuAD paragraphs, so the evaluation pool depends on
the splitter.  This module re-implements, from the written rules of the reference
evaluation (see ``shared/guides/reqa-protocol.md``), a splitter whose ReQA counts on
SQuAD ``dev-v1.1.json`` match the reference exactly: 10,250 candidates and 11,426 QA
inputs.

The splitter is a small pipeline over *break positions*.  A break position ``b`` is the
offset where a sentence ends (``text[:b]`` ends with the sentence's last character); the
next sentence starts at the first non-space character after ``b``.

1. Main rule (``_MAIN_BREAK``): break after ``.``, ``?`` or ``!``, optionally followed by
   closing quotes, closing parentheses or a closing curly quote, then whitespace, then
   optionally an opening quote, bracket or opening curly quote, then an uppercase letter
   or a digit.
2. Extra breaks:
   - after a Wikipedia citation mark that follows a period (``.[12]``);
   - after an ellipsis in brackets (``[...]``);
   - at the bullet character ``•`` (the bullet starts a new sentence).
3. Do not break (rejoin) after common abbreviations (``_PROTECTIONS``):
   - titles: Mr, Mrs, Ms, Dr, Prof, Gen, Col, Lt, Sgt, Capt, Sen, Rep, Gov, Pres, St,
     Jr, Sr, Rev;
   - e.g., i.e., vs., cf.;
   - month abbreviations Jan., Aug., Oct., Nov., Dec.;
   - Mt., Ft.; a.m. and p.m.;
   - single-letter name initials (``J. R. R. Tolkien``);
   - No., Art., Vol. followed by a number;
   - b., d., c., ca., fl. (born, died, circa, flourished);
   - ``et al.`` followed by a year;
   - H.R.; U.S. followed by a number; Rs.; Warner Bros.;
   - the album title ``I Am... Sasha Fierce``.
4. Forced breaks (``_FORCED_BREAK`` and ``_SQUAD_FORCED_BREAKS``), added last so that they
   win over the abbreviations:
   - before a sentence that starts with The, This, That, These, It, Meanwhile, However,
     In, On, By, During, After, Under, Although, Yet, As, Several or According to, when
     the previous character run ends a sentence;
   - SQuAD-specific cases: a sentence ending in ``Jay Z.``, ``Washington, D.C.`` or
     ``Wii U.``, and a sentence starting with ``iPod``/``iTunes`` (lowercase first letter,
     so the main rule misses it).

Sentences are the stretches between consecutive breaks, stripped of whitespace; empty
stretches are dropped.  Spans are offsets into the given text (``text[s:e]`` is the
sentence).  The caller replaces newlines by spaces before calling.
"""

from __future__ import annotations

import re

__all__ = ["SPLITTER_VERSION", "split_sentences"]

#: Bump whenever a rule changes: used in cache keys.
SPLITTER_VERSION = "reqa-rules-1"

_CLOSERS = "\"')\u201d\u2019"  # closing quotes / parenthesis / closing curly quotes
_OPENERS = "\"'(\\[\u201c\u2018"  # opening quotes / bracket / opening curly quotes

# 1. Main rule.  The match ends at the break position (after the closers).
_MAIN_BREAK = re.compile(rf"[.?!][{_CLOSERS}]*(?=\s+[{_OPENERS}]?[A-Z0-9])")

# 2. Extra breaks (the match ends at the break position).
_CITATION_BREAK = re.compile(rf"\.(?:\[[^\[\]]*\])+(?=\s+[{_OPENERS}]?[A-Z0-9])")
_BRACKET_ELLIPSIS_BREAK = re.compile(r"\[(?:\.\.\.|\u2026)\]")
_BULLET = re.compile("\u2022")  # break *before* the bullet

# 3. Protections: (name, regex on the text before the break, regex on the text after it).
# The "before" regex must match at the end of ``text[:b]``; the "after" regex (optional)
# must match at the start of ``text[b:]``.
_NUMBER_AFTER = re.compile(r"\s+[(\[]?\d")
_YEAR_AFTER = re.compile(r"\s+[(\[]?\d{4}")
_NAME_AFTER = re.compile(rf"\s+[{_OPENERS}]?[A-Z]")
_PROTECTIONS: list[tuple[str, re.Pattern[str], re.Pattern[str] | None]] = [
    (
        "title",
        re.compile(r"(?<![\w.])(?:Mrs|Mr|Ms|Dr|Prof|Gen|Col|Lt|Sgt|Capt|Sen|Rep|Gov|Pres|St|Jr|Sr|Rev)\.$"),
        None,
    ),
    ("latin", re.compile(r"(?<![\w.])(?:e\.g|i\.e|vs|cf)\.$", re.IGNORECASE), None),
    ("month", re.compile(r"(?<![\w.])(?:Jan|Aug|Oct|Nov|Dec)\.$"), None),
    ("mount_fort", re.compile(r"(?<![\w.])(?:Mt|Ft)\.$"), None),
    ("time_of_day", re.compile(r"(?<![\w.])[ap]\.m\.$"), None),
    ("initial", re.compile(r"\b[A-Z]\.$"), _NAME_AFTER),
    ("number_abbrev", re.compile(r"(?<![\w.])(?:No|Art|Vol)\.$"), _NUMBER_AFTER),
    ("life_dates", re.compile(r"(?<![\w.])(?:b|d|c|ca|fl)\.$"), None),
    ("et_al_year", re.compile(r"\bet al\.$"), _YEAR_AFTER),
    ("house_resolution", re.compile(r"(?<![\w.])H\.R\.$"), None),
    ("us_number", re.compile(r"(?<![\w.])U\.S\.$"), _NUMBER_AFTER),
    ("rupees", re.compile(r"(?<![\w.])Rs\.$"), None),
    ("warner_bros", re.compile(r"\bWarner Bros\.$"), None),
    ("sasha_fierce", re.compile(r"\bI Am\.\.\.$"), re.compile(r"\s+Sasha Fierce")),
]
_LOOKBEHIND = 16  # the "before" regexes only need this many characters

# 4. Forced breaks.  The match ends at the break position.
_FORCED_STARTERS = (
    "The", "This", "That", "These", "It", "Meanwhile", "However", "In", "On", "By",
    "During", "After", "Under", "Although", "Yet", "As", "Several", "According to",
)
_FORCED_BREAK = re.compile(
    rf"(?<=[.?!])[{_CLOSERS}]*(?=\s+[{_OPENERS}]?(?:{'|'.join(_FORCED_STARTERS)})\b)"
)
_SQUAD_FORCED_BREAKS = [
    re.compile(rf"\bJay Z\.[{_CLOSERS}]*(?=\s+[{_OPENERS}]?[A-Z])"),
    re.compile(rf"\bWashington, D\.C\.[{_CLOSERS}]*(?=\s+[{_OPENERS}]?[A-Z])"),
    re.compile(rf"\bWii U\.[{_CLOSERS}]*(?=\s+[{_OPENERS}]?[A-Z])"),
    re.compile(rf"[.?!][{_CLOSERS}]*(?=\s+i(?:Pod|Tunes)\b)"),
]


def _main_breaks(text: str) -> set[int]:
    return {m.end() for m in _MAIN_BREAK.finditer(text)}


def _extra_breaks(text: str) -> set[int]:
    breaks = {m.end() for m in _CITATION_BREAK.finditer(text)}
    breaks.update(m.end() for m in _BRACKET_ELLIPSIS_BREAK.finditer(text))
    breaks.update(m.start() for m in _BULLET.finditer(text))
    return breaks


def _is_protected(text: str, b: int) -> bool:
    lo = max(0, b - _LOOKBEHIND)
    for _name, before, after in _PROTECTIONS:
        if before.search(text, lo, b) and (after is None or after.match(text, b)):
            return True
    return False


def _forced_breaks(text: str) -> set[int]:
    breaks = {m.end() for m in _FORCED_BREAK.finditer(text)}
    for pattern in _SQUAD_FORCED_BREAKS:
        breaks.update(m.end() for m in pattern.finditer(text))
    return breaks


def _spans_between(text: str, breaks: list[int]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for end in [*breaks, len(text)]:
        s, e = start, end
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if s < e:
            spans.append((s, e))
        start = end
    return spans


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans (start, end-exclusive) of the sentences of `text`, whitespace-stripped,
    in order, non-overlapping; the caller has already replaced newlines by spaces."""
    if not text:
        return []
    breaks = _main_breaks(text) | _extra_breaks(text)
    breaks = {b for b in breaks if not _is_protected(text, b)}
    breaks |= _forced_breaks(text)
    breaks.discard(0)
    breaks.discard(len(text))
    return _spans_between(text, sorted(breaks))
