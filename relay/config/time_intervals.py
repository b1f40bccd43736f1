"""Alertmanager's time intervals, parsed and asked: is an instant inside one, and when may a held delivery go.
Pure (the clock is a parameter); semantics are Alertmanager's (`timeinterval/timeinterval.go`), in the
period's `location` (default UTC).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

WEEKDAYS = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")  # Go's numbering
MONTHS = tuple(m.lower() for m in calendar.month_name[1:])
DAY_MINUTES = 24 * 60
# The furthest ahead `hold_until` looks; an interval that does not open by then holds until then, and the
# delivery is looked at again at that time.
HORIZON = timedelta(days=4 * 366)  # a leap day comes within it
_TIME = re.compile(r"^([0-9]{2}):([0-9]{2})$")  # ASCII digits: `\d` takes ٠٨ too

Range = tuple[int, int]  # inclusive bounds


@dataclass(frozen=True)
class TimeRange:
    start: int  # minute of the day, inclusive
    end: int  # minute of the day, exclusive (1440: the end of the day)


@dataclass(frozen=True)
class Period:
    """One entry of an interval's `time_intervals`: every non-empty field must match."""

    times: tuple[TimeRange, ...] = ()
    weekdays: tuple[Range, ...] = ()  # 0 = Sunday
    days_of_month: tuple[Range, ...] = ()  # negative: from the end of the month
    months: tuple[Range, ...] = ()  # 1 = January
    years: tuple[Range, ...] = ()
    location: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))

    def contains(self, instant: datetime) -> bool:
        local = instant.astimezone(self.location)
        return self._day_matches(local.date()) and self._time_matches(local.hour * 60 + local.minute)

    def _time_matches(self, minute: int) -> bool:
        return not self.times or any(t.start <= minute < t.end for t in self.times)

    def _day_matches(self, day: date) -> bool:
        weekday = day.isoweekday() % 7
        if self.weekdays and not any(lo <= weekday <= hi for lo, hi in self.weekdays):
            return False
        if self.months and not any(lo <= day.month <= hi for lo, hi in self.months):
            return False
        if self.years and not any(lo <= day.year <= hi for lo, hi in self.years):
            return False
        return not self.days_of_month or any(_day_in(day, r) for r in self.days_of_month)

    def edges(self) -> list[int]:
        """The minutes of a local day at which this period may start or stop matching (0: midnight)."""
        return sorted({0, *(t.start for t in self.times), *(t.end for t in self.times)} - {DAY_MINUTES})


@dataclass(frozen=True)
class Interval:
    name: str
    periods: tuple[Period, ...]

    def contains(self, instant: datetime) -> bool:
        return any(p.contains(instant) for p in self.periods)


def _day_in(day: date, bounds: Range) -> bool:
    """Alertmanager's day-of-month match: negative bounds from the month's end, clamped to the month."""
    days = calendar.monthrange(day.year, day.month)[1]
    begin, end = (b if b > 0 else days + b + 1 for b in bounds)
    if begin > days:
        return False  # day 31 of a 30-day month is not the 30th
    begin, end = max(begin, 1), min(end, days)
    return begin <= day.day <= end


def parse_time(value: str, end: bool = False) -> int:
    """`HH:MM` as a minute of the day; `24:00` only as an end."""
    found = _TIME.match(value.strip()) if isinstance(value, str) else None
    if found is None:
        raise ValueError(f"{value!r} is not a time of day as HH:MM")
    hours, minutes = int(found.group(1)), int(found.group(2))
    minute = hours * 60 + minutes
    if minutes > 59 or minute > DAY_MINUTES or (minute == DAY_MINUTES and not end):
        raise ValueError(f"{value!r} is not a time of day (00:00 to 23:59, or 24:00 as an end)")
    return minute


def parse_time_range(start: str, end: str) -> TimeRange:
    lo, hi = parse_time(start), parse_time(end, end=True)
    if lo >= hi:
        raise ValueError(f"start_time {start!r} is not before end_time {end!r}")
    return TimeRange(lo, hi)


def _bounds(value: object, what: str) -> tuple[str, str]:
    text = str(value).strip().lower()
    if not text:
        raise ValueError(f"an empty {what}")
    lo, sep, hi = text.partition(":")
    if lo != lo.strip() or hi != hi.strip():  # as Alertmanager reads a range: `monday:friday`, no spaces
        raise ValueError(f"{value!r}: no spaces around the ':' of a range (like {what} ranges 1:5)")
    return lo, (hi if sep else lo)


def _named(word: str, names: Sequence[str], offset: int, what: str, value: object) -> int:
    if word in names:
        return names.index(word) + offset
    raise ValueError(f"{value!r} is not a {what} ({names[0]} to {names[-1]}, or a range like {names[1]}:{names[4]})")


def _number(word: str, allowed: Container[int], value: object, wrong: str) -> int:
    """`word` as a whole number in `allowed`; else ValueError saying that `value` is not `wrong`."""
    number = _integer(word)
    if number is None or number not in allowed:
        raise ValueError(f"{value!r} is not {wrong}")
    return number


def _ordered(value: object, bounds: Iterable[int], what: str, why: str = "") -> Range:
    lo, hi = bounds
    if lo > hi:
        raise ValueError(f"{value!r}: the first {what} comes after the last{why}")
    return lo, hi


def parse_weekdays(value: object) -> Range:
    days = (_named(w, WEEKDAYS, 0, "weekday", value) for w in _bounds(value, "weekday"))
    return _ordered(value, days, "day", " (weeks run sunday to saturday)")


def parse_months(value: object) -> Range:
    wrong = "a month (1 to 12, or january to december)"
    months = (
        _named(w, MONTHS, 1, "month", value) if _integer(w) is None else _number(w, range(1, 13), value, wrong)
        for w in _bounds(value, "month")
    )
    return _ordered(value, months, "month")


def parse_days_of_month(value: object) -> Range:
    wrong = "a day of month (1 to 31, or -31 to -1 counting from the end)"
    lo, hi = (_number(w, [*range(-31, 0), *range(1, 32)], value, wrong) for w in _bounds(value, "day of month"))
    # As Alertmanager checks it: a negative start needs a negative end, and a negative day is read as in the
    # shortest month (28 days), so that no range is inverted in some months and not others.
    if lo < 0 < hi:
        raise ValueError(f"{value!r}: a range that starts from the month's end must end counted from it too")
    _ordered(value, (b if b > 0 else 28 + b for b in (lo, hi)), "day", " (in a 28-day month)")
    return lo, hi


def parse_years(value: object) -> Range:
    wrong = "a year from 1970 to 9999 (like 2026, or 2026:2028)"  # what every reader can show
    return _ordered(value, (_number(w, range(1970, 10000), value, wrong) for w in _bounds(value, "year")), "year")


@lru_cache(maxsize=1)
def iana_zones() -> frozenset[str]:
    """Every name of the IANA time zone database Python knows but the system's own `localtime`, `posixrules`
    and `Factory` (no place's time): what a config, a person's hours and the page accept."""
    return frozenset(available_timezones() - {"localtime", "posixrules", "Factory"})


def parse_location(value: str | None) -> ZoneInfo:
    name = "UTC" if value is None or value == "" else value
    if name not in iana_zones():
        raise ValueError(f"{value!r} is not a known IANA time zone (like Europe/Rome or UTC)")
    return ZoneInfo(name)


def parse_period(raw: Mapping[str, Any]) -> Period:
    """One period as written in YAML; ValueError naming the value that is wrong."""
    unknown = set(raw) - {"times", "weekdays", "days_of_month", "months", "years", "location"}
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)}")
    return Period(
        times=tuple(parse_time_range(t["start_time"], t["end_time"]) for t in raw.get("times") or []),
        weekdays=tuple(parse_weekdays(v) for v in raw.get("weekdays") or []),
        days_of_month=tuple(parse_days_of_month(v) for v in raw.get("days_of_month") or []),
        months=tuple(parse_months(v) for v in raw.get("months") or []),
        years=tuple(parse_years(v) for v in raw.get("years") or []),
        location=parse_location(raw.get("location")),
    )


def _integer(word: str) -> int | None:
    try:
        return int(word)
    except ValueError:
        return None


def allowed(instant: datetime, active: Iterable[Interval] | None, mute: Iterable[Interval]) -> bool:
    """May a delivery go at `instant`: inside no mute interval, and inside an active one (None: any time)."""
    if any(i.contains(instant) for i in mute):
        return False
    return active is None or any(i.contains(instant) for i in active)


def hold_until(
    now: datetime, active: list[Interval] | None, mute: list[Interval], horizon: timedelta = HORIZON
) -> datetime | None:
    """None when a delivery may go at `now`; else the first instant (UTC) at which it may, walking from edge
    to edge (time boundaries, local midnights, offset changes), between which nothing changes."""
    if now.tzinfo is None:
        raise ValueError("now must be an aware datetime")
    instant = now.astimezone(UTC)
    if allowed(instant, active, mute):
        return None
    periods = [p for i in [*(active or []), *mute] for p in i.periods]
    limit = instant + horizon
    while instant < limit:
        instant = min(_next_edge(p, instant) for p in periods) if periods else limit
        if allowed(instant, active, mute):
            return instant
    return limit


def _next_edge(period: Period, after: datetime) -> datetime:
    """The first instant after `after` at which `period` may start or stop matching."""
    zone = period.location
    local_day = after.astimezone(zone).date()
    found: datetime | None = None
    for day in (local_day, local_day + timedelta(days=1)):
        for minute in period.edges():
            wall = datetime(day.year, day.month, day.day, minute // 60, minute % 60, tzinfo=zone)
            for fold in (0, 1):  # a wall time that happens twice (the autumn change) is an edge both times
                candidate = wall.replace(fold=fold).astimezone(UTC)
                if candidate > after and (found is None or candidate < found):
                    found = candidate
        if found is not None:
            break
    assert found is not None  # tomorrow's midnight always comes
    return _offset_change(zone, after, found) or found


def _offset_change(zone: ZoneInfo, after: datetime, before: datetime) -> datetime | None:
    """The first whole minute in (after, before] with another UTC offset than `after` (a DST change moves
    the wall clock: a time a period starts at may be skipped over), or None."""
    offset = after.astimezone(zone).utcoffset()
    if before.astimezone(zone).utcoffset() == offset:
        return None  # zones change offset at most once between two edges a day apart
    lo = after.replace(second=0, microsecond=0)  # offset(lo) == offset
    hi = before  # offset(hi) != offset
    while hi - lo > timedelta(minutes=1):
        mid = lo + timedelta(minutes=(hi - lo) // timedelta(minutes=1) // 2)
        if mid.astimezone(zone).utcoffset() == offset:
            lo = mid
        else:
            hi = mid
    return hi
