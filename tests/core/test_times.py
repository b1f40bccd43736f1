"""The one parse of time (relay.core.times): ISO 8601 into epoch seconds within what every reader can show,
`since` as a duration or a time, and how long active hours can stay closed (the warnings of holds that
outlast the retention). Pure: the time is a parameter."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from relay.config.intervals import TimePeriodConfig
from relay.config.time_intervals import Interval, parse_period
from relay.core.model import iso
from relay.core.times import LAST, closed_too_long, instant, longest_closed, since
from relay.silences.model import Silence, past_retention

pytestmark = pytest.mark.dated

WEDNESDAY = datetime(2026, 11, 25, 12, 0, tzinfo=UTC).timestamp()
DAY = 86400.0


def _hours(**period: object) -> Interval:
    checked = TimePeriodConfig.model_validate(period).model_dump(exclude_defaults=True)
    return Interval("activeHours", (parse_period(checked),))


@pytest.mark.parametrize(
    ("text", "epoch"),
    [
        ("2026-11-27T18:30:00Z", datetime(2026, 11, 27, 18, 30, tzinfo=UTC).timestamp()),
        ("2026-11-27T19:30:00+01:00", datetime(2026, 11, 27, 18, 30, tzinfo=UTC).timestamp()),
        ("2026-11-27T18:30:00", datetime(2026, 11, 27, 18, 30, tzinfo=UTC).timestamp()),  # no offset: UTC
        ("2026-11-27", datetime(2026, 11, 27, tzinfo=UTC).timestamp()),
        ("1970-01-01T00:00:00Z", 0.0),
        ("9999-12-31T23:59:59Z", LAST),
        ("0001-01-01T00:00:00-23:59", None),  # before 1970 whatever the offset
    ],
)
def test_an_iso_time_is_read_in_utc_within_1970_to_9999(text: str, epoch: float | None) -> None:
    if epoch is None:
        with pytest.raises(ValueError, match=r"outside 1970-01-01T00:00:00\.000Z to 9999-12-31T23:59:59\.000Z"):
            instant(text)
        return
    assert instant(text) == epoch
    assert iso(instant(text))  # every time read can be written back


@pytest.mark.parametrize(
    "value",
    ["0001-01-01T00:00:00+23:59", "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-00:01", "10000-01-01", "soon", 0],
)
def test_what_no_reader_could_show_is_refused(value: object) -> None:
    with pytest.raises(ValueError) as refused:
        instant(value)
    assert repr(value) in str(refused.value)


def test_since_is_a_duration_back_or_a_time() -> None:
    assert since("2h", WEDNESDAY) == WEDNESDAY - 7200
    assert since("2026-11-25T11:00:00Z", WEDNESDAY) == WEDNESDAY - 3600
    with pytest.raises(ValueError):
        since("0001-01-01T00:00:00+05:00", WEDNESDAY)


def test_how_long_active_hours_stay_closed() -> None:
    office = _hours(weekdays=["monday:friday"], times=[{"start_time": "08:00", "end_time": "18:00"}])
    start, until = longest_closed(office, WEDNESDAY) or (0.0, 0.0)
    assert until - start == 62 * 3600 and iso(start) == "2026-11-27T18:00:00.000Z"  # Friday evening to Monday
    assert closed_too_long(office, WEDNESDAY, 3 * DAY) is None
    assert "stay closed up to 2d14h" in (closed_too_long(office, WEDNESDAY, 2 * DAY) or "")
    gone = _hours(years=["2020"])
    assert longest_closed(gone, WEDNESDAY) == (WEDNESDAY, math.inf)
    assert "do not open in the next 4 years" in (closed_too_long(gone, WEDNESDAY, 30 * DAY) or "")
    december = _hours(months=["december"])
    assert "stay closed up to 334d" in (closed_too_long(december, WEDNESDAY, 30 * DAY) or "")
    assert longest_closed(_hours(location="Europe/Rome"), WEDNESDAY) is None  # always open


def test_a_silence_warns_of_a_hold_past_retention_only() -> None:
    def silence(start: float, end: float, action: str = "hold") -> Silence:
        return Silence("s", ('kind="x"',), start, end, "ana", "c", action)  # type: ignore[arg-type]

    assert past_retention(silence(WEDNESDAY, WEDNESDAY + 30 * DAY), WEDNESDAY, 30 * DAY) is None
    warned = past_retention(silence(WEDNESDAY, WEDNESDAY + 31 * DAY), WEDNESDAY, 30 * DAY)
    assert warned and iso(WEDNESDAY + 31 * DAY) in warned and "kept past retention (30d) until it ends" in warned
    assert past_retention(silence(WEDNESDAY, WEDNESDAY + 31 * DAY, "skip"), WEDNESDAY, 30 * DAY) is None
    # A pending one holds from its start: a day's silence a year ahead holds a day.
    assert past_retention(silence(WEDNESDAY + 365 * DAY, WEDNESDAY + 366 * DAY), WEDNESDAY, 30 * DAY) is None
