"""Calendar periods in text: what a temporal query asks about, and what an entry mentions.

Theory of operation
-------------------
A temporal question often names the period it is about ("in June", "on 1 February,
2023", "in 2022"); an entry often says when it happened ("1:56 pm on 8 May, 2023"). A
:class:`Period` is a calendar cell at one of four grains: a year, a month of a year, a
day of a month of a year, and the year-less month or day ("in June", "on May 7"). Both
sides are read with one ASCII regular expression (:data:`_DATE`), in one left-to-right
pass, so the cost is linear in the text's length whatever it holds:

* ``2023-05-08`` (ISO day);
* ``8 May, 2023`` / ``8th of May 2023`` / ``8 May`` (day month [year]);
* ``May 8, 2023`` / ``May 8th`` (month day [year]);
* ``May 2023`` / ``May, 2023`` / ``May`` (month [year]);
* ``2023`` (a bare year, 1900-2099).

Month names are English, capitalised (``"may"`` is not a month), full or as a
three-letter abbreviation (``Sept`` too) followed by a day or a year (``"Jan"`` alone is
a name, not January). Digits are ASCII only (``[0-9]``, never ``\\d``, which matches
other scripts' digits that ``int`` would then read). Years run 1900-2099; a day must
exist in its month (February 29 in any year-less mention, else only in leap years).

Known false positives: a sentence-initial or name "May" / "June" / "August" followed by
nothing date-like still reads as that month, and any number 1900-2099 standing alone
(a count, a price, a room) as a year. They only matter when a query names a period.

An entry's dates are read from the first :data:`MENTION_CHARS` (4,096) characters of
its text (and of its tags, joined), so reading them costs the same bounded time for a
100,000-character text; a date mentioned further on is ignored.

A mention is *inside* a period when it fixes every field the period fixes, to the same
value: ``8 May, 2023`` is inside ``May 2023``, ``2023``, ``May`` and ``8 May``; ``May
2023`` is not inside ``8 May, 2023`` (coarser), nor ``2023`` inside ``May``.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from datetime import datetime

import attrs

__all__ = ["MENTION_CHARS", "Period", "in_period", "mentioned_periods", "query_period"]

#: :func:`mentioned_periods` reads this many characters of a text at most: the owner
#: runs it on every stored text in one step, so its cost must not grow with the text.
MENTION_CHARS = 4096

# English names, spelled out (``calendar.month_name`` follows the process's locale).
_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_MONTHS = {name: i for i, name in enumerate(_NAMES, 1)}
_MONTHS.update({name[:3]: i for i, name in enumerate(_NAMES, 1)})
_MONTHS["Sept"] = 9
_FULL = "|".join(_NAMES)
# Every spelling, longest first so that "Sept" is not read as "Sep" + "t"; abbreviations
# are read only beside a day or a year (the groups that use _ANY), full names alone too.
_ANY = "|".join(sorted(_MONTHS, key=len, reverse=True))
_YEAR = r"(?:19|20)[0-9]{2}"
_DAY = r"[0-9]{1,2}(?:st|nd|rd|th)?"
_SEP = r",?[ \t]{1,3}"  # bounded: no backtracking over long runs of blanks

_DATE = re.compile(
    rf"(?<![0-9A-Za-z])(?:"
    rf"(?P<iso_y>{_YEAR})-(?P<iso_m>[0-9]{{2}})-(?P<iso_d>[0-9]{{2}})(?![0-9])"
    rf"|(?P<dm_d>{_DAY})[ \t]{{1,3}}(?:of[ \t]{{1,3}})?(?P<dm_m>{_ANY})\.?"
    rf"(?:{_SEP}(?P<dm_y>{_YEAR}))?(?![0-9A-Za-z])"
    rf"|(?P<md_m>{_ANY})\.?[ \t]{{1,3}}(?P<md_d>{_DAY})(?![0-9A-Za-z])"
    rf"(?:{_SEP}(?P<md_y>{_YEAR}))?(?![0-9A-Za-z])"
    rf"|(?P<my_m>{_ANY})\.?{_SEP}(?P<my_y>{_YEAR})(?![0-9A-Za-z])"
    rf"|(?P<m_m>{_FULL})(?![0-9A-Za-z])"
    rf"|(?P<y_y>{_YEAR})(?![0-9A-Za-z])"
    rf")",
    re.ASCII,
)


@attrs.frozen
class Period:
    """A calendar cell: a year, a month (of a year or of any year), or a day.

    Attributes:
        year: 1900-2099, or ``None`` (any year).
        month: 1-12, or ``None`` (the whole year; then ``day`` is ``None`` too).
        day: 1-31, or ``None`` (the whole month).
    """

    year: int | None
    month: int | None
    day: int | None

    def contains(self, other: Period) -> bool:
        """Whether ``other`` fixes every field this period fixes, to the same value. O(1)."""
        return (
            (self.year is None or self.year == other.year)
            and (self.month is None or self.month == other.month)
            and (self.day is None or self.day == other.day)
        )

    @classmethod
    def of(cls, when: datetime) -> Period:
        """The day of ``when`` (its own calendar, no time zone conversion)."""
        return cls(when.year, when.month, when.day)


def _day(text: str | None) -> int:
    assert text is not None
    return int(text.rstrip("stndrh"))


def _make(year: str | None, month: int, day: int | None) -> Period | None:
    y = None if year is None else int(year)
    if day is not None:
        # A year-less day is checked against a leap year (February 29 exists).
        if not 1 <= day <= calendar.monthrange(2000 if y is None else y, month)[1]:
            return None
    return Period(y, month, day)


def _periods(text: str) -> Iterator[Period]:
    for m in _DATE.finditer(text):
        g = m.group
        p: Period | None
        if g("iso_y") is not None:
            month = int(g("iso_m"))
            p = _make(g("iso_y"), month, int(g("iso_d"))) if 1 <= month <= 12 else None
        elif g("dm_m") is not None:
            p = _make(g("dm_y"), _MONTHS[g("dm_m")], _day(g("dm_d")))
        elif g("md_m") is not None:
            p = _make(g("md_y"), _MONTHS[g("md_m")], _day(g("md_d")))
        elif g("my_m") is not None:
            p = _make(g("my_y"), _MONTHS[g("my_m")], None)
        elif g("m_m") is not None:
            p = Period(None, _MONTHS[g("m_m")], None)
        else:
            p = Period(int(g("y_y")), None, None)
        if p is not None:
            yield p


def mentioned_periods(text: str) -> tuple[Period, ...]:
    """Every date the first :data:`MENTION_CHARS` characters of ``text`` mention (module
    docs), in order, repeats removed; later ones are ignored.

    ``"1:56 pm on 8 May, 2023"`` gives ``(Period(2023, 5, 8),)``. Runtime complexity:
    O(min(len(text), MENTION_CHARS)).
    """
    return tuple(dict.fromkeys(_periods(text[:MENTION_CHARS])))


def query_period(query: str) -> Period | None:
    """The period a query is about: its first date mention, or ``None`` if it has none.

    ``"When did Melanie go camping in June?"`` gives ``Period(None, 6, None)``; ``"What
    happened on October 13, 2023?"`` ``Period(2023, 10, 13)``. Runtime complexity:
    O(len(query)) (the scan stops at the first mention).
    """
    return next(_periods(query), None)


def in_period(text: str, period: Period) -> bool:
    """Whether ``text`` mentions a date inside ``period`` (module docs). O(len(text))."""
    return any(period.contains(p) for p in _periods(text))
