"""Tests for the ReQA sentence splitter (``retrieval_qa.data.splitter``).

One hand-written example per rule, each checked twice: the splitter gives the expected
sentences, and without that rule it does not (so every example really exercises its rule).
Order-dependent cases (a later join undoing an earlier split, a forced split winning over an
abbreviation), the span invariants and the ASCII-minded character classes. The paragraph by
paragraph comparison with the reference on real SQuAD is in test_splitter_reference.py, the
ReQA counts in tests/integration/test_shared_data.py."""

from __future__ import annotations

import re

import pytest

from retrieval_qa.data import splitter
from retrieval_qa.data.splitter import RULES, SPLITTER_VERSION, mark_breaks, split_sentences


def sents(text: str) -> list[str]:
    return [text[s:e] for s, e in split_sentences(text)]


# (rule, text, expected sentences)
EXAMPLES = [
    ("main", "It rained. Then it stopped.", ["It rained.", "Then it stopped."]),
    ("main", 'He said "Stop." "Why?" she asked.', ['He said "Stop."', '"Why?" she asked.']),
    ("main", "Was it 1990? 1991 is likely.", ["Was it 1990?", "1991 is likely."]),
    ("main", "Done! (Twice.) [A] note.", ["Done!", "(Twice.)", "[A] note."]),
    ("citation", "It was big.[12] Some disagree.", ["It was big.[12]", "Some disagree."]),
    ("citation", "Fine.[note 3][b] Next one.", ["Fine.[note 3][b]", "Next one."]),
    ("citation", "So.[citation needed] 2001 came.", ["So.[citation needed]", "2001 came."]),
    # the ellipsis_line rule then moves the break before "[...]" too
    ("bracket_ellipsis", "need such things [...] But why", ["need such things", "[...]", "But why"]),
    ("title", "Mr. Smith met Dr. Jones.", ["Mr. Smith met Dr. Jones."]),
    ("title", "Ask Fr. Brown and Msgr. Hall.", ["Ask Fr. Brown and Msgr. Hall."]),
    ("title", "He lived on Sta. Maria.", ["He lived on Sta. Maria."]),
    ("rank", "Under Gen. Lee and Capt. Ahab.", ["Under Gen. Lee and Capt. Ahab."]),
    ("literary", "Some fruit, e.g. Apples, keep.", ["Some fruit, e.g. Apples, keep."]),
    ("literary", "It weighs approx. 5 kg here.", ["It weighs approx. 5 kg here."]),
    ("literary", "See pp. 4 and cf. Smith.", ["See pp. 4 and cf. Smith."]),
    ("month", "Born on Jan. 5 of that year.", ["Born on Jan. 5 of that year."]),
    ("mount_fort", "They climbed Mt. Fuji near Ft. Worth.", ["They climbed Mt. Fuji near Ft. Worth."]),
    ("time_zone", "At 9 p.m. Eastern time.", ["At 9 p.m. Eastern time."]),
    ("three_initials", "Written by J. R. R. Tolkien himself.", ["Written by J. R. R. Tolkien himself."]),
    ("two_initials", "Ask A. B. Smith about it.", ["Ask A. B. Smith about it."]),
    ("dotted_initials", "Ask A.B. Smith about it.", ["Ask A.B. Smith about it."]),
    ("one_initial", "John F. Kennedy spoke.", ["John F. Kennedy spoke."]),
    ("starter_the_it", "Mr. The Band played.", ["Mr.", "The Band played."]),
    ("main", 'He left." Then rain.', ['He left."', "Then rain."]),
    ("starter_however", "Gen. However lost.", ["Gen.", "However lost."]),
    ("starter_preposition", "Capt. During the war.", ["Capt.", "During the war."]),
    ("numbered_part", "See Art. 5 of the law.", ["See Art. 5 of the law."]),
    ("numbered_part", "His Op. 35 is famous.", ["His Op. 35 is famous."]),
    ("life_dates", "Kings (r. 1368-1398) ruled.", ["Kings (r. 1368-1398) ruled."]),
    ("life_dates", "He was b. 1900 in Rome.", ["He was b. 1900 in Rome."]),
    ("et_al_year", "As Smith et al. 2005 showed.", ["As Smith et al. 2005 showed."]),
    ("house_resolution", "Congress passed H.R. 2000 then.", ["Congress passed H.R. 2000 then."]),
    ("sasha_fierce", "Her album I Am... Sasha Fierce sold.", ["Her album I Am... Sasha Fierce sold."]),
    ("warner_bros", "Signed to Warner Bros. Records in 2000.",
     ["Signed to Warner Bros. Records in 2000."]),
    ("us_number", "The U.S. 101 highway.", ["The U.S. 101 highway."]),
    ("rupees", "It costs Rs. 500 now.", ["It costs Rs. 500 now."]),
    ("jay_z", "She married Jay Z. Later they toured.", ["She married Jay Z.", "Later they toured."]),
    ("washington_dc", "Based in Washington, D.C. Robert left.",
     ["Based in Washington, D.C.", "Robert left."]),
    ("for_4", "It was scored for 4.) Nothing else.", ["It was scored for 4.)", "Nothing else."]),
    ("wii_u", "Released on the Wii U. Sales were low.", ["Released on the Wii U.", "Sales were low."]),
    ("ipod_itunes", "Apple sold Macs. iPod sales grew.", ["Apple sold Macs.", "iPod sales grew."]),
    ("ellipsis_line", "She said so. [...] Then she left.",
     ["She said so.", "[...]", "Then she left."]),
    ("msc", "He holds a M.Sc. Degree in physics.", ["He holds a M.Sc. Degree in physics."]),
    ("bullet", "Items: \u2022 Apples \u2022 Pears", ["Items:", "\u2022 Apples", "\u2022 Pears"]),
]


# Rules of the reference that another rule always covers: kept, as the reference has them.
SUBSUMED = {"dotted_initials": "one_initial", "for_4": "main"}


def _without(rule_name: str, text: str) -> list[str]:
    marked = text.replace("\n", " ")
    for rule in RULES:
        if rule.name != rule_name:
            marked = rule.pattern.sub(rule.replacement, marked)
    return [s.strip() for s in marked.split("\n") if s.strip()]


@pytest.mark.parametrize("rule, text, expected", EXAMPLES,
                         ids=[f"{r}-{i}" for i, (r, _, _) in enumerate(EXAMPLES)])
def test_rule_example(rule, text, expected):
    assert sents(text) == expected
    if rule not in SUBSUMED:  # the example needs its rule
        assert _without(rule, text) != expected, f"{rule!r} does not change this example"


def test_every_rule_has_an_example():
    assert {r.name for r in RULES} <= {r for r, _, _ in EXAMPLES}


@pytest.mark.parametrize("rule, other", SUBSUMED.items())
def test_subsumed_rules_change_nothing_that_their_cover_does_not(rule, other):
    text, expected = next((t, e) for r, t, e in EXAMPLES if r == rule)
    assert _without(rule, text) == expected
    marked = text.replace("\n", " ")
    for r in RULES[: [x.name for x in RULES].index(other) + 1]:
        if r.name != rule:
            marked = r.pattern.sub(r.replacement, marked)
    assert [x.strip() for x in marked.split("\n")] == expected


def test_rule_kinds_and_names_are_unique():
    assert len({r.name for r in RULES}) == len(RULES)
    assert {r.kind for r in RULES} == {"split", "join"}


# ----------------------------------------------------------- what the rules do not do


@pytest.mark.parametrize("text", [
    "It ends in e.g. lowercase.",                # no capital after: no break to start with
    "The U.S. Senate voted.",                     # initials join (U. then S. before "Senate")
    "Pope St. John Paul II.",                     # title
    "He was 5 ft. tall.",                         # lowercase after the period
    "The value is 3.14 exactly.",                 # no whitespace after the period
])
def test_no_break(text):
    assert sents(text) == [text]


@pytest.mark.parametrize("text, expected", [
    # no rule protects a break inside parentheses
    ("Cited (Ps. 31:5) often.", ["Cited (Ps.", "31:5) often."]),
    # name initials need an ASCII lowercase second letter
    ("By C. G\u00fcttel then.", ["By C.", "G\u00fcttel then."]),
    # a capital outside ASCII does not start a sentence
    ("It ended. \u00c9mile came.", ["It ended. \u00c9mile came."]),
    # "Thus" is not a forced starter, and forced starters need one space
    ("Reduced to X.Thus no problem.", ["Reduced to X.Thus no problem."]),
    # Jr and Sr are not protected titles
    ("Martin Luther King Jr. Day is here.", ["Martin Luther King Jr.", "Day is here."]),
])
def test_reference_behaviour_that_a_reader_might_not_expect(text, expected):
    assert sents(text) == expected


def test_a_later_join_undoes_a_forced_split():
    # "b. In" is split by the preposition starter, then joined again by the life-dates rule
    assert sents("He was b. In 1900 he moved.") == ["He was b. In 1900 he moved."]


def test_newlines_count_as_spaces_and_offsets_point_into_the_input():
    text = "First line.\nSecond line."
    assert split_sentences(text) == [(0, 11), (12, 24)]


# ------------------------------------------------------------------------- API


def test_version_is_a_nonempty_string():
    assert isinstance(SPLITTER_VERSION, str) and SPLITTER_VERSION


@pytest.mark.parametrize("text", ["", " ", "   "])
def test_empty_or_blank_text_has_no_sentences(text):
    assert split_sentences(text) == []


@pytest.mark.parametrize("text", [t for _, t, _ in EXAMPLES])
def test_marking_keeps_the_length(text):
    assert len(mark_breaks(text)) == len(text)


@pytest.mark.parametrize("text", [t for _, t, _ in EXAMPLES] + [
    "  Leading and trailing spaces.   Second one!  ", "No final punctuation here"])
def test_span_invariants(text):
    spans = split_sentences(text)
    assert spans
    prev_end = 0
    for s, e in spans:
        assert 0 <= prev_end <= s < e <= len(text)
        assert text[s:e] == text[s:e].strip()
        prev_end = e
    gaps = text[: spans[0][0]] + "".join(text[e:s] for (_, e), (s, _) in zip(spans, spans[1:], strict=False))
    assert gaps.strip() == "" and text[spans[-1][1]:].strip() == ""


def test_patterns_use_no_nested_set_syntax():
    # every pattern compiles without FutureWarning (no unescaped "[" inside a class)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for rule in RULES:
            re.compile(rule.pattern.pattern)
    assert splitter.__all__
