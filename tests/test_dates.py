"""Date mentions and query periods (actormem._index.dates): the formats read, invalid
dates refused, containment, hostile and Unicode text, linear time on huge input."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index.dates import Period, in_period, mentioned_periods, query_period

from .strategies import examples


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("When did Melanie go camping in June?", Period(None, 6, None)),
        ("What did Gina find on 1 February, 2023?", Period(2023, 2, 1)),
        ("What painting was shown on October 13, 2023?", Period(2023, 10, 13)),
        ("What happened in July 2023?", Period(2023, 7, None)),
        ("in May, 2023", Period(2023, 5, None)),
        ("How often in 2022?", Period(2022, None, None)),
        ("on the 8th of May 2023", Period(2023, 5, 8)),
        ("Sept 3rd, 2021", Period(2021, 9, 3)),
        ("Dec. 2020", Period(2020, 12, None)),
        ("on 2024-02-29", Period(2024, 2, 29)),
        ("1:56 pm on 8 May, 2023", Period(2023, 5, 8)),
        ("Feb 29", Period(None, 2, 29)),  # a year-less day checks against a leap year
        # Known weaknesses (module docs): a capitalised "May" and a bare 1900-2099 number.
        ("May I help you?", Period(None, 5, None)),
        ("room 2001 is free", Period(2001, None, None)),
    ],
)
def test_query_period_reads_the_first_mention(text: str, want: Period) -> None:
    assert query_period(text) == want


@pytest.mark.parametrize(
    "text",
    [
        "",
        "What did they talk about?",
        "may I come?",  # lower case: not a month
        "Jan said hi",  # an abbreviation alone is a name
        "2023-02-30",  # no such day
        "2023-13-01",
        "31 April",
        "Feb 29, 2023",  # not a leap year
        "12345 and 2023x and x2023 and 1899 and 2100",
        "٢٠٢٣ ۲۰۲۳ ２０２３ 𝟐𝟎𝟐𝟑",  # other scripts' digits are not read
        "Mayday Junebug Marches ２３, ２０２３",
        "0 May",
    ],
)
def test_no_period(text: str) -> None:
    assert query_period(text) is None
    assert mentioned_periods(text) == ()


def test_unicode_digits_beside_a_real_date_do_not_crash() -> None:
    # "\d" would match these and int() would then read some and refuse others.
    text = "on ٣ May ٢٠٢٣, then 4 May 2023 and ¹⁹⁹⁹ 5"
    assert mentioned_periods(text) == (Period(None, 5, None), Period(2023, 5, 4))


def test_mentions_in_order_without_repeats() -> None:
    text = "From 8 May, 2023 to June 2023; again 8 May, 2023, in 2024."
    assert mentioned_periods(text) == (
        Period(2023, 5, 8),
        Period(2023, 6, None),
        Period(2024, None, None),
    )


@pytest.mark.parametrize(
    ("period", "inside", "outside"),
    [
        (Period(2023, None, None), ["8 May, 2023", "June 2023", "in 2023"], ["8 May", "2022"]),
        (Period(2023, 5, None), ["8 May, 2023", "May 2023"], ["May", "2023", "8 June, 2023"]),
        (Period(None, 5, None), ["8 May, 2023", "May 2024", "May 8"], ["2023", "June"]),
        (Period(2023, 5, 8), ["on 2023-05-08"], ["May 2023", "9 May, 2023", "8 May, 2024"]),
        (Period(None, 5, 8), ["8 May", "May 8th, 1999"], ["May", "9 May"]),
    ],
)
def test_in_period_means_the_mention_fixes_every_field_of_the_period(
    period: Period, inside: list[str], outside: list[str]
) -> None:
    for text in inside:
        assert in_period(f"we met {text}.", period), text
    for text in outside:
        assert not in_period(f"we met {text}.", period), text


def test_period_of_a_datetime_is_its_day() -> None:
    when = datetime(2023, 5, 8, 23, 59, tzinfo=UTC)
    assert Period.of(when) == Period(2023, 5, 8)
    assert Period(2023, 5, None).contains(Period.of(when))


def test_huge_and_hostile_input_is_read_in_one_pass() -> None:
    # Long runs of what almost matches: digits then blanks, month names with no year,
    # separators; each would backtrack quadratically under a careless pattern.
    n = 200_000
    assert mentioned_periods("1 " * n) == ()
    # Blanks between day and month are bounded: the month alone, not the 1st (a query
    # is read whole; a stored text up to MENTION_CHARS, see test_dense_review.py).
    assert query_period("1" + " " * n + "May") == Period(None, 5, None)
    assert mentioned_periods("May, " * n) == (Period(None, 5, None),)
    assert mentioned_periods("2023-" * n) == (Period(2023, None, None),)
    text = "x" * n + " on 3 March, 2021"
    assert query_period(text) == Period(2021, 3, 3)
    assert in_period(text, Period(2021, None, None))


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(
        st.one_of(
            st.characters(),
            st.sampled_from(list("0123456789 ,.-/stndrh") + ["May", "June", "Sept", "of"]),
            st.sampled_from(["2023", "1999", "29", "٢٠٢٣", "２０２３"]),
        ),
        max_size=30,
    ).map("".join)
)
def test_any_text_gives_valid_periods(text: str) -> None:
    found = mentioned_periods(text)
    for p in found:
        assert p.year is None or 1900 <= p.year <= 2099
        assert p.month is None or 1 <= p.month <= 12
        assert p.day is None or (p.month is not None and 1 <= p.day <= 31)
        assert in_period(text, p)
    assert query_period(text) == (found[0] if found else None)
