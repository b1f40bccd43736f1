"""Times at relay's boundaries, read once: an ISO 8601 instant from the API, the page or the CLI becomes epoch
seconds on relay's clock, only within what every reader can show (1970 to 9999 in UTC); and how long active
hours can stay closed (the warning of a hold longer than `retention`). Durations: relay.config.durations."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema

from relay.config.durations import parse_duration
from relay.config.time_intervals import HORIZON, Interval, hold_until
from relay.core.model import iso
from relay.digests.model import human_duration

FIRST = 0.0  # 1970-01-01T00:00:00Z
LAST = 253402300799.0  # 9999-12-31T23:59:59Z: the last second four digits of year write
EXAMPLE = "2026-11-27T18:30:00Z"
# How far ahead `longest_closed` looks: a week and a day for hours that repeat weekly (a DST change may add
# an hour to one stretch), a year for those that name days of the month, months or years.
WEEK, YEAR = timedelta(days=8), timedelta(days=366)


def showable(ts: float) -> bool:
    """Whether every reader can show `ts`: a number from 1970 to 9999 in UTC (NaN is none)."""
    return FIRST <= ts <= LAST


def instant(value: Any) -> float:
    """No offset: UTC. ValueError saying what is wrong (a number is none: seconds are never guessed from ms)."""
    shown = repr(value if not isinstance(value, str) or len(value) <= 40 else value[:39] + "…")
    if not isinstance(value, str):
        raise ValueError(f"{shown} is not an ISO 8601 time, like {EXAMPLE}")
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"{shown} is not an ISO 8601 time, like {EXAMPLE}") from None
    ts = (parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)).timestamp()
    if not showable(ts):
        raise ValueError(f"{shown} is outside {iso(FIRST)} to {iso(LAST)} (in UTC)")
    return ts


def since(value: str, now: float) -> float:
    """A duration back from `now` (`2h`, `1h30m`) or an ISO 8601 time (`instant`); ValueError for neither."""
    try:
        return now - parse_duration(value)
    except ValueError:
        return instant(value)


# A request's time: an ISO 8601 string read by `instant` (absent or null: None), shown as one in OpenAPI.
Instant = Annotated[
    float | None,
    BeforeValidator(lambda v: None if v is None else instant(v)),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


def kept_past(retention: float, holds: str = "it holds", until: str = "it ends") -> str:
    return f"the deliveries {holds} are kept past retention ({human_duration(retention)}) until {until}"


def longest_closed(hours: Interval, now: float) -> tuple[float, float] | None:
    """The longest stretch of the coming week (year) in which `hours` stay closed: (from, until), until `inf`
    when they do not open again within relay's look-ahead (4 years); None when they never close."""
    at, longest = datetime.fromtimestamp(now, UTC), None
    end = at + (YEAR if any(p.days_of_month or p.months or p.years for p in hours.periods) else WEEK)
    while at < end:
        opens = hold_until(at, [hours], [])
        if opens is None:  # open: on to when they close (when they would let a delivery go, were they a mute)
            closes = hold_until(at, None, [hours], end - at)
            if closes is None or closes >= end:
                break
            at = closes
            continue
        until = opens.timestamp() if hours.contains(opens) else math.inf
        if longest is None or until - at.timestamp() > longest[1] - longest[0]:
            longest = (at.timestamp(), until)
        if until == math.inf:
            break
        at = opens
    return longest


def closed_too_long(hours: Interval, now: float, retention: float) -> str | None:
    """A warning when `hours` (a person's, a route's) can stay closed longer than `retention`; else None."""
    found = longest_closed(hours, now)
    if found is None or found[1] - found[0] <= retention:
        return None
    start, until = found
    if until == math.inf:
        said = f"the active hours do not open in the next {HORIZON.days // 365} years"
    else:
        said = f"the active hours stay closed up to {human_duration(until - start)} (from {iso(start)})"
    return f"{said}: {kept_past(retention, 'they hold', 'they open')}"
