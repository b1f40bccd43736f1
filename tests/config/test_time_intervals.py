"""Alertmanager's time intervals (relay.config.time_intervals): parsing, matching, and when a held delivery
may go, across zones, DST changes (Europe/Rome in March and October), month ends and leap days."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from relay.config.time_intervals import Interval, hold_until, parse_period

pytestmark = pytest.mark.dated


def interval(name: str, *periods: dict[str, Any]) -> Interval:
    return Interval(name, tuple(parse_period(p) for p in periods))


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


ROME = "Europe/Rome"
OFFICE = interval(
    "office-hours",
    {"weekdays": ["monday:friday"], "times": [{"start_time": "08:00", "end_time": "18:00"}], "location": ROME},
)
NIGHT_ROME = interval("night", {"times": [{"start_time": "02:30", "end_time": "04:00"}], "location": ROME})
EARLY_MUTE = interval("early", {"times": [{"start_time": "02:00", "end_time": "02:30"}], "location": ROME})
LAST_DAY = interval("last-day", {"days_of_month": [-1]})
LAST_THREE = interval("last-three", {"days_of_month": ["-3:-1"]})
THIRTY_FIRST = interval("thirty-first", {"days_of_month": ["31"]})
LEAP_DAY = interval("leap-day", {"months": ["february"], "days_of_month": [29]})
FREEZE = interval("freeze", {"months": ["december"], "days_of_month": ["24:26"], "years": [2026], "location": ROME})
LATE = interval("late", {"times": [{"start_time": "22:00", "end_time": "24:00"}]})
NEXT_YEAR = interval("2027", {"years": ["2027:2028"]})
NEW_YORK = interval(
    "ny-office",
    {
        "weekdays": ["monday:friday"],
        "times": [{"start_time": "09:00", "end_time": "17:00"}],
        "location": "America/New_York",
    },
)
KOLKATA = interval("kolkata", {"times": [{"start_time": "09:00", "end_time": "10:00"}], "location": "Asia/Kolkata"})
TWO_RANGES = interval(
    "split-day",
    {"times": [{"start_time": "09:00", "end_time": "12:00"}, {"start_time": "14:00", "end_time": "17:00"}]},
)
SUMMER_OR_WEEKEND = interval("either", {"months": ["june:august"]}, {"weekdays": ["saturday", "sunday"]})

CASES = [
    # (what, now UTC, active, mute, may go at (UTC) or None: now)
    ("inside office hours (Rome, CET)", "2026-11-25 09:00", [OFFICE], [], None),
    ("start is inclusive", "2026-11-25 07:00", [OFFICE], [], None),
    ("a second before the start", "2026-11-25 06:59:59", [OFFICE], [], "2026-11-25 07:00"),
    ("end is exclusive: Friday 18:00 waits for Monday", "2026-11-27 17:00", [OFFICE], [], "2026-11-30 07:00"),
    ("the last minute before the end", "2026-11-27 16:59:59", [OFFICE], [], None),
    ("weekend", "2026-11-28 12:00", [OFFICE], [], "2026-11-30 07:00"),
    # Spring forward on 2026-03-29: Monday 08:00 is CEST, 06:00 UTC.
    ("weekend across the March change", "2026-03-28 12:00", [OFFICE], [], "2026-03-30 06:00"),
    # 02:30 does not exist on 2026-03-29: the clock jumps from 02:00 CET to 03:00 CEST (01:00 UTC), inside.
    ("a start skipped by the March change", "2026-03-29 00:30", [NIGHT_ROME], [], "2026-03-29 01:00"),
    ("the next day after the March change", "2026-03-29 02:00", [NIGHT_ROME], [], "2026-03-30 00:30"),
    # Fall back on 2026-10-25: Monday 08:00 is CET, 07:00 UTC.
    ("weekend across the October change", "2026-10-23 17:00", [OFFICE], [], "2026-10-26 07:00"),
    # 02:00-02:30 happens twice on 2026-10-25: at 00:00-00:30 UTC (CEST) and 01:00-01:30 UTC (CET).
    ("muted in the first 02:00 (CEST)", "2026-10-25 00:10", None, [EARLY_MUTE], "2026-10-25 00:30"),
    ("between the two 02:00s", "2026-10-25 00:45", None, [EARLY_MUTE], None),
    ("muted in the second 02:00 (CET)", "2026-10-25 01:10", None, [EARLY_MUTE], "2026-10-25 01:30"),
    ("last day of February", "2026-02-10 12:00", [LAST_DAY], [], "2026-02-28 00:00"),
    ("last day of a leap February", "2028-02-10 12:00", [LAST_DAY], [], "2028-02-29 00:00"),
    ("last day of a 31-day month", "2026-01-30 23:59", [LAST_DAY], [], "2026-01-31 00:00"),
    ("last three days of April (30 days)", "2026-04-10 00:00", [LAST_THREE], [], "2026-04-28 00:00"),
    ("inside the last three days", "2026-04-30 23:59", [LAST_THREE], [], None),
    ("day 31 is not the 30th of April", "2026-04-10 00:00", [THIRTY_FIRST], [], "2026-05-31 00:00"),
    ("the next leap day", "2026-03-01 00:00", [LEAP_DAY], [], "2028-02-29 00:00"),
    ("a mute interval wins over an active one", "2026-12-24 10:00", [OFFICE], [FREEZE], "2026-12-28 07:00"),
    ("mute ending at 24:00", "2026-11-25 23:30", None, [LATE], "2026-11-26 00:00"),
    ("mute starting at 22:00, inclusive", "2026-11-25 22:00", None, [LATE], "2026-11-26 00:00"),
    ("before the mute", "2026-11-25 21:59:59", None, [LATE], None),
    ("a year range", "2026-06-01 12:00", [NEXT_YEAR], [], "2027-01-01 00:00"),
    ("New York office hours (EST)", "2026-11-25 06:00", [NEW_YORK], [], "2026-11-25 14:00"),
    ("New York after the US March change (EDT)", "2026-03-08 20:00", [NEW_YORK], [], "2026-03-09 13:00"),
    ("a half-hour zone", "2026-11-25 00:00", [KOLKATA], [], "2026-11-25 03:30"),
    ("between two ranges of a day", "2026-11-25 12:00", [TWO_RANGES], [], "2026-11-25 14:00"),
    ("any of several periods", "2026-11-25 12:00", [SUMMER_OR_WEEKEND], [], "2026-11-28 00:00"),
    ("any of several active intervals", "2026-11-28 12:00", [OFFICE, LATE], [], "2026-11-28 22:00"),
    ("nothing given", "2026-11-25 03:00", None, [], None),
]


@pytest.mark.parametrize(("what", "now", "active", "mute", "expected"), CASES, ids=[c[0] for c in CASES])
def test_hold_until(
    what: str, now: str, active: list[Interval] | None, mute: list[Interval], expected: str | None
) -> None:
    found = hold_until(utc(now), active, mute)
    assert found == (utc(expected) if expected else None), what
    if found is not None:
        assert found.tzinfo == UTC


def test_hold_until_reads_now_in_any_zone() -> None:
    from zoneinfo import ZoneInfo

    local = datetime(2026, 11, 27, 18, 0, tzinfo=ZoneInfo(ROME))  # Friday 18:00 in Rome
    assert hold_until(local, [OFFICE], []) == utc("2026-11-30 07:00")


def test_an_interval_that_never_opens_holds_until_the_horizon() -> None:
    from datetime import timedelta

    past = interval("past", {"years": ["2020"]})
    now = utc("2026-11-25 00:00")
    assert hold_until(now, [past], [], horizon=timedelta(days=10)) == now + timedelta(days=10)


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        hold_until(datetime(2026, 1, 1), [OFFICE], [])


PARSED = [
    ({"weekdays": ["Monday:Friday"]}, "weekdays", ((1, 5),)),
    ({"weekdays": ["sunday", "saturday"]}, "weekdays", ((0, 0), (6, 6))),
    ({"months": ["january:march", 12, "11"]}, "months", ((1, 3), (12, 12), (11, 11))),
    ({"days_of_month": ["1:5", -1, "-7:-1", "10:-1"]}, "days_of_month", ((1, 5), (-1, -1), (-7, -1), (10, -1))),
    ({"years": ["2026:2028", 2030]}, "years", ((2026, 2028), (2030, 2030))),
]


@pytest.mark.parametrize(("raw", "attr", "expected"), PARSED)
def test_parse(raw: dict[str, Any], attr: str, expected: Any) -> None:
    assert getattr(parse_period(raw), attr) == expected


def test_parse_times_and_location() -> None:
    period = parse_period({"times": [{"start_time": "00:00", "end_time": "24:00"}], "location": "Asia/Tokyo"})
    assert (period.times[0].start, period.times[0].end) == (0, 1440)
    assert str(period.location) == "Asia/Tokyo"
    assert str(parse_period({}).location) == "UTC"


INVALID = [
    ({"times": [{"start_time": "25:61", "end_time": "26:00"}]}, "'25:61'"),
    ({"times": [{"start_time": "08:00", "end_time": "24:01"}]}, "'24:01'"),
    ({"times": [{"start_time": "24:00", "end_time": "24:00"}]}, "'24:00'"),
    ({"times": [{"start_time": "8:00", "end_time": "09:00"}]}, "'8:00'"),
    ({"times": [{"start_time": "10:00", "end_time": "09:00"}]}, "not before"),
    ({"times": [{"start_time": "10:00", "end_time": "10:00"}]}, "not before"),
    ({"weekdays": ["funday"]}, "'funday'"),
    ({"weekdays": ["saturday:sunday"]}, "after the last"),
    ({"months": ["13"]}, "'13'"),
    ({"months": ["smarch"]}, "'smarch'"),
    ({"months": ["march:january"]}, "after the last"),
    ({"days_of_month": [0]}, "0"),
    ({"days_of_month": ["32"]}, "'32'"),
    ({"days_of_month": ["-32"]}, "'-32'"),
    ({"days_of_month": ["10:5"]}, "after the last"),
    ({"days_of_month": ["-1:-5"]}, "after the last"),
    # What Alertmanager refuses: a negative start with a positive end, an inversion in a 28-day month, spaces.
    ({"days_of_month": ["-3:29"]}, "counted from it too"),
    ({"days_of_month": ["26:-3"]}, "in a 28-day month"),
    ({"weekdays": ["monday : friday"]}, "no spaces"),
    ({"years": ["twenty"]}, "'twenty'"),
    ({"years": ["2028:2026"]}, "after the last"),
    ({"location": "Mars/Olympus_Mons"}, "'Mars/Olympus_Mons'"),
    ({"location": "../../etc/passwd"}, "not a known IANA time zone"),
    ({"weekday": ["monday"]}, "unknown field"),
    ({"times": [{"start_time": "\u0660\u0668:\u0660\u0660", "end_time": "18:00"}]}, "not a time of day as HH:MM"),
    ({"location": "Factory"}, "not a known IANA time zone"),
    ({"location": "localtime"}, "not a known IANA time zone"),
    ({"years": ["99999"]}, "not a year from 1970 to 9999"),
    ({"years": ["1969"]}, "not a year from 1970 to 9999"),
]


@pytest.mark.parametrize(("raw", "message"), INVALID)
def test_invalid(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_period(raw)


@pytest.mark.parametrize("start", ["2026-03-27 16:07", "2026-10-23 16:07", "2026-02-26 21:13"])
def test_hold_until_agrees_with_a_minute_by_minute_walk(start: str) -> None:
    """Every 131 minutes over three days around a DST change or a month end: the first allowed minute found
    by walking minute by minute is the one hold_until computes."""
    from datetime import timedelta

    from relay.config.time_intervals import allowed

    cases = [([OFFICE], []), ([NIGHT_ROME], [EARLY_MUTE]), (None, [EARLY_MUTE, LATE]), ([LAST_DAY, KOLKATA], [])]
    minute = timedelta(minutes=1)
    for active, mute in cases:
        now = utc(start)
        for _ in range(3 * 24 * 60 // 131):
            walk = now
            while not allowed(walk, active, mute):
                walk = walk.replace(second=0, microsecond=0) + minute
            assert hold_until(now, active, mute) == (None if walk == now else walk), (now, active, mute)
            now += timedelta(minutes=131)
