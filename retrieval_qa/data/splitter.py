"""ReQA reference sentence splitter (rule based, stdlib only).

ReQA candidates are the sentences of SQuAD paragraphs, so the evaluation pool depends on the
splitter. This module follows the rules of the reference ReQA evaluation's sed-style
splitter (``sb_sed.py`` in google/retrieval-qa-eval, 2019), rule for rule and in the same
order, so that every paragraph of SQuAD dev and train is split as the reference splits it;
``tests/data/test_splitter_reference.py`` checks that paragraph by paragraph against
boundaries recorded from the reference (``tests/data/fixtures/``).

How it works: the text is a single line (newlines already replaced by spaces). A list of
regular-expression rewrites, applied in order, inserts ``\\n`` where a sentence ends
(*split* rules replace one whitespace character by ``\\n``) or turns a ``\\n`` back into a
space (*join* rules). Every rewrite keeps the length of the text, so offsets into the
rewritten text are offsets into the input. Sentences are the ``\\n``-separated stretches,
whitespace stripped. Order matters: a later join undoes an earlier split and a later split
wins over an earlier join.

The rules (``RULES``), in order:

1. ``main``: break after ``.``, ``?`` or ``!`` followed by any run of ``)``, ``'``, ``"``,
   spaces or ``\u201d``, then whitespace, then optional whitespace, an optional opening
   ``[``, ``'``, ``"``, ``(`` or ``\u201c``, then an ASCII capital or a digit.
2. ``citation``: break after a Wikipedia editorial mark (``[12]``, ``[citation needed]``,
   ``[note 1][b]``: letters, digits, spaces and ``?`` in brackets) that follows a
   sentence end, before a capital or digit.
3. ``bracket_ellipsis``: break after ``[...]`` before a capital (optionally bracketed).
4. Joins for abbreviations before a break: titles (Mr, Mrs, Ms, Dr, Prof, Fr, Rev, Msgr,
   St, Sta; Lt, Gen, Col, Maj, Adm, Capt, Sgt, Rep, Gov, Sen, Pres), literary abbreviations
   (e.g, i.e/ie, v/vs, p/pp, cf, a.k.a, approx, app, esp, est, tr), months (Jan, Aug, Oct,
   Nov, Dec), Mt and Ft, and ``a.m.``/``p.m.`` before ``Eastern``/``EST``.
5. Joins for personal names with three, two or one initials before a capitalised word
   (``J. R. R. Tolkien``; the name must start ``[A-Z][a-z]`` in ASCII, so ``C. G\u00fcttel``
   stays split), and ``A.B.`` before such a word (a rule that ``one_initial`` covers).
6. Forced splits before common sentence starts: The, This, That, These, It (after a
   sentence end with optional closing quotes or parenthesis); Meanwhile, However (after a
   period); In, On, By, During, After, Under, Although, Yet, As, Several, According to
   (after a period). These need exactly one space and win over the joins of steps 4-5.
7. Joins that win over step 6: numbered parts (Art, No, Op, Opp, ch, Sec, cl, Rec, Ecl,
   Cor, Lk, Jn, Vol before a number or Roman numeral), life dates (b, d, r, c, ca, fl
   before a capital or digit), ``et al.`` before a year, ``H.R.`` before a digit.
8. SQuAD-specific joins: ``I Am...`` + Sasha Fierce / World Tour, ``Warner Bros.`` +
   Records / Entertainment, ``U.S.`` before a number of two or more digits, ``Rs.`` before
   a digit.
9. SQuAD-specific splits: after ``Jay Z.``, ``Washington, D.C.``, ``for 4.)``, ``Wii U.``
   before a capital; before ``iPod``/``iTunes`` after a period; before ``[...]`` that ends a
   line; joins after ``.Sc.``; a split before a bullet ``\u2022`` followed by a capital.

The splitter is ASCII-minded where the reference is: ``[A-Z]`` means ASCII capitals, so a
sentence that starts with ``\u00c9`` is not broken off. The reference produces an empty
sentence for an empty text and cannot handle a stretch of only whitespace between two
breaks; here empty stretches are dropped (no SQuAD paragraph has one).
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["RULES", "SPLITTER_VERSION", "mark_breaks", "split_sentences"]

#: Bump whenever a rule changes: used in cache keys (the cache also hashes this file).
SPLITTER_VERSION = "reqa-reference-3"

_BREAK = "\n"
_LDQ, _RDQ = "\u201c", "\u201d"  # curly double quotes
_END = "[.?!]"  # sentence-ending punctuation


class Rule(NamedTuple):
    name: str
    kind: str  # "split" or "join": documentation and tests; both are plain rewrites
    pattern: re.Pattern[str]
    replacement: str


def _rule(name: str, kind: str, pattern: str, replacement: str) -> Rule:
    return Rule(name, kind, re.compile(pattern), replacement)


def _joined(words: str) -> str:
    """``(?:a|b|c)`` from a space-separated word list (each item is a regex fragment)."""
    return "(?:" + "|".join(words.split()) + ")"


_TITLES = _joined(r"Mrs? Ms Dr Prof Fr Rev Msgr Sta?")
_RANKS = _joined("Lt Gen Col Maj Adm Capt Sgt Rep Gov Sen Pres")
_LITERARY = _joined(r"e\.g i\.?e vs? pp? cf a\.k\.a approx app es[pt] tr")
_MONTHS = _joined("Jan Aug Oct Nov Dec")
_NUMBERED = _joined("[Aa]rt [Nn]o Opp? ch Sec cl Rec Ecl Cor Lk Jn Vol")
_NAME = "\"?[A-Z][a-z]"  # the start of a capitalised name, optionally quoted
_INITIAL = "[A-Z]\\."

RULES: tuple[Rule, ...] = (
    # 1-3. Splits.
    _rule("main", "split",
          rf"({_END}[)'\" {_RDQ}]*)\s(\s*[\['\"({_LDQ}]?[A-Z0-9])", r"\1\n\2"),
    _rule("citation", "split",
          rf"({_END}['\"]?)((?:\[[a-zA-Z0-9 ?]+\])+)\s(\s*['\"(]?[A-Z0-9])", r"\1\2\n\3"),
    _rule("bracket_ellipsis", "split", r"(\[\.\.\.\]\s*)\s(\[?[A-Z])", r"\1\n\2"),
    # 4. Abbreviations.
    _rule("title", "join", rf"\b({_TITLES})\.\n", r"\1. "),
    _rule("rank", "join", rf"\b({_RANKS})\.\n", r"\1. "),
    _rule("literary", "join", rf"\b({_LITERARY})\.\n", r"\1. "),
    _rule("month", "join", rf"\b({_MONTHS})\.\n", r"\1. "),
    _rule("mount_fort", "join", r"\b(Mt|Ft)\.\n", r"\1. "),
    _rule("time_zone", "join", r"\b([ap]\.m)\.\n(Eastern|EST)\b", r"\1. \2"),
    # 5. Initials before a name.
    _rule("three_initials", "join",
          rf"\b({_INITIAL})[ \n]({_INITIAL})[ \n]({_INITIAL})[ \n]({_NAME})", r"\1 \2 \3 \4"),
    _rule("two_initials", "join", rf"\b({_INITIAL})[ \n]({_INITIAL})[ \n]({_NAME})",
          r"\1 \2 \3"),
    _rule("dotted_initials", "join", rf"\b({_INITIAL}{_INITIAL})\n({_NAME})", r"\1 \2"),
    _rule("one_initial", "join", rf"\b({_INITIAL})\n({_NAME})", r"\1 \2"),
    # 6. Forced splits before common sentence starts.
    _rule("starter_the_it", "split", rf"({_END}['\")]*) (The|This|That|These|It) ",
          r"\1\n\2 "),
    _rule("starter_however", "split", r"(\.) (Meanwhile|However)", r"\1\n\2"),
    _rule("starter_preposition", "split",
          r"(\.) (In|On|By|During|After|Under|Although|Yet|As |Several|According to) ",
          r"\1\n\2 "),
    # 7. Joins that win over the forced splits.
    _rule("numbered_part", "join", rf"\b({_NUMBERED})\.\n([0-9IVX]+)\b", r"\1. \2"),
    _rule("life_dates", "join", r"\b([bdrc]|ca|fl)\.\n([A-Z0-9])", r"\1. \2"),
    _rule("et_al_year", "join", r"\b(et al)\.\n(\(?[0-9]{4}\b)", r"\1. \2"),
    _rule("house_resolution", "join", r"\b(H\.R\.)\n([0-9])", r"\1 \2"),
    # 8. SQuAD-specific joins.
    _rule("sasha_fierce", "join", r"(I Am\.\.\.)\n(Sasha Fierce|World Tour)", r"\1 \2"),
    _rule("warner_bros", "join", r"(Warner Bros\.)\n(Records|Entertainment)", r"\1 \2"),
    _rule("us_number", "join", r"(U\.S\.)\n(\(?\d\d+)", r"\1 \2"),
    _rule("rupees", "join", r"\b(Rs\.)\n(\d)", r"\1 \2"),
    # 9. SQuAD-specific splits (and one join).
    _rule("jay_z", "split", r"\b(Jay Z\.) ([A-Z])", r"\1\n\2"),
    _rule("washington_dc", "split", r"\b(Washington, D\.C\.) ([A-Z])", r"\1\n\2"),
    _rule("for_4", "split", r"\b(for 4\.\)) ([A-Z])", r"\1\n\2"),
    _rule("wii_u", "split", r"\b(Wii U\.) ([A-Z])", r"\1\n\2"),
    _rule("ipod_itunes", "split", r"\. (iPod|iTunes)", r".\n\1"),
    _rule("ellipsis_line", "split", r" (\[\.\.\.\]\n)", r"\n\1"),
    _rule("msc", "join", r"(\.Sc\.)\n", r"\1 "),
    _rule("bullet", "split", " (\u2022 [A-Z])", r"\n\1"),
)  # fmt: skip


def mark_breaks(text: str) -> str:
    """``text`` with a newline at every sentence break (same length as ``text``).

    Args:
        text: a paragraph.
    """
    marked = text.replace("\n", " ")
    for rule in RULES:
        marked = rule.pattern.sub(rule.replacement, marked)
    return marked


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans (start, end-exclusive) of the sentences of ``text``, whitespace
    stripped, in order and non-overlapping. Newlines in ``text`` count as spaces.

    Args:
        text: a paragraph.
    """
    marked = mark_breaks(text)
    spans: list[tuple[int, int]] = []
    start = 0
    for end in [*(m.start() for m in re.finditer(_BREAK, marked)), len(marked)]:
        s, e = start, end
        while s < e and marked[s].isspace():
            s += 1
        while e > s and marked[e - 1].isspace():
            e -= 1
        if s < e:
            spans.append((s, e))
        start = end + 1
    return spans
