"""Tests for the ReQA reference sentence splitter (``retrieval_qa.data.splitter``).

One test per rule of the protocol (``shared/guides/reqa-protocol.md``) on small
hand-written strings, the cases found while tuning on SQuAD dev (most quoted from it),
span invariants, and one integration test that checks the reference ReQA counts on the
real dev file (10,250 candidates, 11,426 QA inputs).
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from retrieval_qa.data.splitter import SPLITTER_VERSION, split_sentences

REPO = Path(__file__).resolve().parents[2]
DEV_FILE = (
    Path(os.environ.get("RQA_DATA_DIR", REPO.parent / "shared" / "data"))
    / "squad"
    / "dev-v1.1.json.gz"
)


def sents(text: str) -> list[str]:
    return [text[s:e] for s, e in split_sentences(text)]


def assert_no_break(text: str) -> None:
    assert sents(text) == [text], sents(text)


# --------------------------------------------------------------------------- API


def test_version_is_a_nonempty_string():
    assert isinstance(SPLITTER_VERSION, str) and SPLITTER_VERSION


@pytest.mark.parametrize("text", ["", " ", "   "])
def test_empty_or_blank_text_has_no_sentences(text):
    assert split_sentences(text) == []


SAMPLES = [
    "One sentence.",
    "  Leading and trailing spaces.   Second one!  ",
    'He said "Stop." Then he left. (It rained.) [A note.] 2016 was a year.',
    "Morgan.[improper synthesis?] Over the next five years. Mr. Smith went to St. Louis.",
    "• First bullet • Second bullet. Third sentence? Yes!",
    "No final punctuation here",
    "Ellipsis... Then more. J. R. R. Tolkien wrote it (c. 1937). The end.",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_span_invariants(text):
    spans = split_sentences(text)
    assert spans
    prev_end = 0
    for s, e in spans:
        assert 0 <= prev_end <= s < e <= len(text)  # in order, non-overlapping, in the text
        assert text[s:e] == text[s:e].strip()  # whitespace-stripped, non-empty
        prev_end = e
    # Nothing but whitespace is lost between the spans.
    rest = text[: spans[0][0]] + "".join(
        text[e:s] for (_, e), (s, _) in zip(spans, spans[1:], strict=False)
    )
    assert rest.strip() == "" and text[spans[-1][1] :].strip() == ""


def test_spans_are_offsets_into_the_given_text():
    text = "Alpha beta.  Gamma delta?  Epsilon!"
    assert split_sentences(text) == [(0, 11), (13, 25), (27, 35)]


# ------------------------------------------------------------------ 1. main rule


def test_main_rule_breaks_after_period_question_and_exclamation_marks():
    assert sents("It rained. Was it cold? Yes! 2016 was warm.") == [
        "It rained.",
        "Was it cold?",
        "Yes!",
        "2016 was warm.",
    ]


def test_main_rule_keeps_closing_quotes_and_parentheses_in_the_sentence():
    assert sents('He said "stop." Then (twice.) Then \u201cno.\u201d Done.') == [
        'He said "stop."',
        "Then (twice.)",
        "Then \u201cno.\u201d",
        "Done.",
    ]


def test_main_rule_allows_an_opening_quote_or_bracket_before_the_capital():
    assert sents('It ended. "Never" he said. (See below.) [A] note. \u201cYes\u201d it was.') == [
        "It ended.",
        '"Never" he said.',
        "(See below.)",
        "[A] note.",
        "\u201cYes\u201d it was.",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "The value is 3.5 percent.",  # no whitespace after the period
        "It rose to 5 p.m. and beyond.",  # lowercase after the period
        "Version 2.Works fine.",  # no whitespace (and not a forced starter)
        "Read the book... and stop.",
    ],
)
def test_main_rule_needs_whitespace_then_capital_or_digit(text):
    assert_no_break(text)


# --------------------------------------------------------------- 2. extra breaks


@pytest.mark.parametrize(
    "text, expected",
    [
        ("It was big.[12] Then it fell.", ["It was big.[12]", "Then it fell."]),
        (
            "Tesla left Colorado Springs.[citation needed] His lab was torn down in 1904.",
            ["Tesla left Colorado Springs.[citation needed]", "His lab was torn down in 1904."],
        ),
        (  # dev: several marks in a row
            "in Jerusalem.[citation needed][original research?] In modern times, some did.",
            ["in Jerusalem.[citation needed][original research?]", "In modern times, some did."],
        ),
        (  # dev: a mark that ends with "?"
            "with Morgan.[improper synthesis?] Over the next five years, Tesla wrote.",
            ["with Morgan.[improper synthesis?]", "Over the next five years, Tesla wrote."],
        ),
        ("The oxygen.[b] The highest energy.", ["The oxygen.[b]", "The highest energy."]),
    ],
)
def test_break_after_a_citation_mark_that_follows_a_period(text, expected):
    assert sents(text) == expected


def test_citation_mark_followed_by_a_period_breaks_once():
    # dev: "difficulties.[citation needed]. The Quasiturbine ..."
    text = "It has practical difficulties.[citation needed]. The Quasiturbine is a uniflow."
    assert sents(text) == [
        "It has practical difficulties.[citation needed].",
        "The Quasiturbine is a uniflow.",
    ]


def test_citation_mark_mid_sentence_does_not_break():
    assert_no_break("This is a theoretical[according to whom?] process by which it works.")


def test_break_after_an_ellipsis_in_brackets():
    # dev (Martin Luther): "... contributes to faith. [...] For reason is ..."
    text = "Reason in no way contributes to faith. [...] For reason is the greatest enemy."
    assert sents(text) == [
        "Reason in no way contributes to faith. [...]",
        "For reason is the greatest enemy.",
    ]
    assert sents("First part [\u2026] second part.") == ["First part [\u2026]", "second part."]


def test_break_at_the_bullet_character():
    assert sents("Features: \u2022 fast \u2022 small") == [
        "Features:",
        "\u2022 fast",
        "\u2022 small",
    ]


# -------------------------------------------------- 3a. no break after abbreviations


@pytest.mark.parametrize(
    "title",
    ["Mr", "Mrs", "Ms", "Dr", "Prof", "Gen", "Col", "Lt", "Sgt", "Capt", "Sen", "Rep",
     "Gov", "Pres", "St", "Jr", "Sr", "Rev"],
)  # fmt: skip
def test_no_break_after_titles(title):
    assert_no_break(f"The speech by {title}. Smith was long.")


@pytest.mark.parametrize(
    "text",
    [
        "They used tools, e.g. Hammers were common.",
        "They used the language (i.e. Mongolian) at court.",
        "It was Ali vs. Frazier in the final.",
        "See the earlier work, cf. Smith on the topic.",
        "Rare, E.g. Here.",  # case-insensitive
    ],
)
def test_no_break_after_latin_abbreviations(text):
    assert_no_break(text)


@pytest.mark.parametrize("month", ["Jan", "Aug", "Oct", "Nov", "Dec"])
def test_no_break_after_month_abbreviations(month):
    assert_no_break(f"It opened on {month}. 12, 2001 in Paris.")


def test_no_break_after_mount_and_fort():
    assert_no_break("He indicated Mt. Kenya as Mt. Kenia, near Ft. Worth.")


def test_no_break_after_am_and_pm():
    # dev (ABC): "... from 12:00 to 6:00 p.m. Eastern Time ..."
    assert_no_break("It airs from 12:00 to 6:00 p.m. Eastern Time on Saturdays.")
    assert_no_break("It starts at 9:00 a.m. Pacific time.")


@pytest.mark.parametrize(
    "text",
    [
        "The author J. R. R. Tolkien wrote it.",
        "In November 1960, John F. Kennedy was elected president.",
        "Running back C. J. Anderson was the leading rusher.",  # dev
        "It was later dedicated to President John F. Kennedy's goal.",
        "Scott's assistant J.W. Wild designed it.",  # dotted initials
    ],
)
def test_no_break_after_single_letter_initials(text):
    assert_no_break(text)


def test_initials_rule_covers_dotted_abbreviations_before_a_capital():
    # the last letter of "U.S." or "D.C." is a single capital letter plus a period
    assert_no_break("In much of the U.S. South, many white students migrated.")
    assert_no_break("The U.S. Defense Secretary spoke.")


def test_initials_rule_does_not_apply_before_a_digit():
    assert sents("Tesla was born on 10 July [O.S. 28 June] 1856.") == [
        "Tesla was born on 10 July [O.S.",
        "28 June] 1856.",
    ]


def test_no_break_after_no_art_vol_only_before_a_number():
    assert_no_break("The song reached No. 1 in the UK and No. 2 in Australia.")
    assert_no_break("Kenya has ratified Convention No. 81 on labour inspection.")
    assert_no_break("See Art. 5 of the treaty and Vol. 2 of the report.")
    assert sents("He said no. No one came.") == ["He said no.", "No one came."]


@pytest.mark.parametrize(
    "text",
    [
        "His contemporary, Reguier de la Plancha (d. 1560), wrote.",
        "The retable of St George, c. 1400, has many panels.",
        "The population amounted to ca. 2 million at that time.",  # dev
        "The poet (b. 1950) and the monk Zhi Guang (fl. 1403) met.",
    ],
)
def test_no_break_after_born_died_circa_flourished(text):
    assert_no_break(text)


def test_no_break_after_et_al_only_before_a_year():
    assert_no_break("As found by Jones et al. 1998 and Briffa 2000, it warmed.")
    assert_no_break("Fajnzylber et al. (2002) found a similar relationship.")
    assert sents("This was shown by Smith et al. Later work disagreed.") == [
        "This was shown by Smith et al.",
        "Later work disagreed.",
    ]


def test_no_break_after_hr_rs_and_warner_bros():
    assert_no_break("Two bills (S.742 and H.R. 2562) aimed at phasing it out.")
    assert_no_break("The price was Rs. 500 per month.")
    assert_no_break("He joined Warner Bros. Records in 1958.")


def test_no_break_after_us_only_before_a_number():
    # dev: Supreme Court citations
    assert_no_break("The case is cited as 427 U.S. 160 (1976) by later courts.")
    # "U.S." before a capital is kept by the initials rule; before an ordinary sentence
    # it breaks only when a forced starter follows
    assert sents("They left the U.S. The war was over.") == [
        "They left the U.S.",
        "The war was over.",
    ]


def test_no_break_inside_the_album_title_i_am_sasha_fierce():
    assert_no_break("Her third album, I Am... Sasha Fierce, was released in 2008.")
    assert sents("It was the I Am... World Tour.") == ["It was the I Am...", "World Tour."]


# ------------------------------------------------- 3b. no break inside parentheses


@pytest.mark.parametrize(
    "text",
    [  # all from dev
        "They lie on the Vistula terraces (max. 6.5 m above the river level).",
        "It is the common prayer (Ps. 31:5), said by many.",
        'It began with the "Yeke Mongghul Ulus" (lit. "Great Mongol State"), he said.',
        "The Great Northern War (1700\u201321, Sweden v. Russia and allies) killed many.",
        "The Doctor of Pharmacy (Pharm. D.) degree is now required.",
    ],
)
def test_no_break_inside_an_unclosed_round_parenthesis(text):
    assert_no_break(text)


def test_parenthesis_rule_ends_at_the_closing_parenthesis():
    # train: "(r. 1368-1398)" would otherwise break after "r."
    assert sents("He ruled as the Hongwu Emperor (r. 1368\u20131398). It is not clear.") == [
        "He ruled as the Hongwu Emperor (r. 1368\u20131398).",
        "It is not clear.",
    ]
    # dev (Tymnet): a parenthesis that holds whole sentences stays one sentence
    assert sents("It was new. (They lost money. Warner was right.) Then it grew.") == [
        "It was new.",
        "(They lost money. Warner was right.)",
        "Then it grew.",
    ]


def test_parenthesis_rule_ignores_unmatched_closing_parentheses():
    assert sents("Options are 1) red and 2) blue. Pick one. (Or both.) Done.") == [
        "Options are 1) red and 2) blue.",
        "Pick one.",
        "(Or both.)",
        "Done.",
    ]


def test_square_brackets_do_not_block_breaks():
    # dev: "... higher returns [pp. 384 Table 12.2, ...]"
    assert sents("It returns more [pp. 384 Table 12.2] than before.") == [
        "It returns more [pp.",
        "384 Table 12.2] than before.",
    ]


# --------------------------------------------------------------- 4. forced breaks


@pytest.mark.parametrize(
    "starter",
    ["The", "This", "That", "These", "It", "Meanwhile", "However", "In", "On", "By",
     "During", "After", "Under", "Although", "Yet", "As", "Several", "According to",
     "Thus"],
)  # fmt: skip
def test_forced_break_before_a_starter_wins_over_an_abbreviation(starter):
    # dev: "... an upgraded version of the Saturn I. The S-IB first stage ..."
    text = f"It was an upgraded version of the Saturn I. {starter} stage was new."
    assert sents(text) == [
        "It was an upgraded version of the Saturn I.",
        f"{starter} stage was new.",
    ]


def test_forced_break_after_closing_quotes():
    text = 'It was called the "Saturn V." The next one followed.'
    assert sents(text) == ['It was called the "Saturn V."', "The next one followed."]


def test_forced_break_without_whitespace():
    # dev: "... Israel's collapse...This [$2.2 billion] decision ..."
    assert sents("to prevent the collapse...This decision was final.") == [
        "to prevent the collapse...",
        "This decision was final.",
    ]
    assert sents("leadership within the church.In 1990 it grew.") == [
        "leadership within the church.",
        "In 1990 it grew.",
    ]


def test_forced_break_needs_a_whole_word_starter():
    assert_no_break("In the Saturn V. Theodore Smith flew it.")
    assert_no_break("It is sold in the U.S. Internationally it is rare.")


def test_forced_break_thus_case_from_dev():
    # the one dev case that needs "Thus" (QA input count 11,426)
    text = "A problem X is hard for C if every problem in C can be reduced to X. Thus no problem in C is harder than X."
    assert sents(text) == [
        "A problem X is hard for C if every problem in C can be reduced to X.",
        "Thus no problem in C is harder than X.",
    ]


def test_forced_break_needs_a_sentence_end_before_it():
    assert_no_break("He said that The Beatles were great.")


@pytest.mark.parametrize(
    "text, expected",
    [
        (  # train (Beyonce)
            "On April 4, 2008, Beyonc\u00e9 married Jay Z. She revealed it later.",
            ["On April 4, 2008, Beyonc\u00e9 married Jay Z.", "She revealed it later."],
        ),
        (  # train (Richmond)
            "It is the Capitol in Washington, D.C. Robert Mills designed the church.",
            ["It is the Capitol in Washington, D.C.", "Robert Mills designed the church."],
        ),
        (  # train (The Legend of Zelda)
            "It is developed for the Wii U. Officially announced in 2014, it is new.",
            ["It is developed for the Wii U.", "Officially announced in 2014, it is new."],
        ),
        (  # train (IPod)
            "It uses the font Myriad. iPods with color displays adopted it.",
            ["It uses the font Myriad.", "iPods with color displays adopted it."],
        ),
        (  # train (American Idol)
            "Ratings declined in the mid-2010s. iTunes sponsored the show.",
            ["Ratings declined in the mid-2010s.", "iTunes sponsored the show."],
        ),
    ],
)
def test_squad_specific_forced_breaks(text, expected):
    assert sents(text) == expected


def test_squad_specific_cases_do_not_break_elsewhere():
    assert_no_break("The D.C. Statehood Party formed in 1970.")
    assert_no_break("He bought an iPod. the end")
    assert_no_break("She met Jay Z. at a party.")


# ------------------------------------------------- integration: ReQA counts on dev


def reqa_counts_for_test(path: Path) -> tuple[int, int, int, int]:
    """Minimal ReQA counter (independent of the package's builder):
    (candidates, QA inputs, answers outside every sentence, distinct question strings).

    Candidates are deduplicated on (sentence text, paragraph text); a question gives one QA
    input per distinct answer-sentence text; the answer sentence is the first span with
    start <= answer_start < end."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        data = json.load(f)["data"]
    candidates: set[tuple[str, str]] = set()
    qa_inputs = outside = 0
    questions: set[str] = set()
    for article in data:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"].replace("\n", " ")
            spans = split_sentences(context)
            candidates.update((context[s:e], context) for s, e in spans)
            for qa in paragraph["qas"]:
                questions.add(qa["question"])
                answer_sentences = set()
                for answer in qa["answers"]:
                    start = answer["answer_start"]
                    span = next(((s, e) for s, e in spans if s <= start < e), None)
                    if span is None:
                        outside += 1
                    else:
                        answer_sentences.add(context[span[0] : span[1]])
                qa_inputs += len(answer_sentences)
    return len(candidates), qa_inputs, outside, len(questions)


@pytest.mark.integration
def test_reqa_counts_on_squad_dev_match_the_reference():
    if not DEV_FILE.is_file():
        pytest.skip(f"SQuAD dev file not found at {DEV_FILE} (set RQA_DATA_DIR)")
    assert reqa_counts_for_test(DEV_FILE) == (10_250, 11_426, 0, 10_539)
