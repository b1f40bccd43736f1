"""What a person's page shows (rows of kinds by channel, active hours as a simple form) and what its form means."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from relay.config import Config
from relay.config.intervals import TimePeriodConfig
from relay.config.time_intervals import WEEKDAYS, iana_zones, parse_weekdays
from relay.core.names import channel_label
from relay.preferences.model import Preference, critical, human_kind, literal_opt_out

# Monday first, as people read a week.
DAYS = (*WEEKDAYS[1:], WEEKDAYS[0])
DEFAULT_HOURS = ("09:00", "17:00")


@dataclass(frozen=True)
class Row:
    key: str  # stable across requests: the form names rows by it
    kind: str
    channel: str
    name: str
    count: int
    on: bool
    critical: bool
    label: str = ""  # the channel as recipients know it (its `label:`)


def row_key(kind: str, channel: str) -> str:
    return hashlib.sha256(f"{kind}\x00{channel}".encode()).hexdigest()[:16]


def rows(config: Config, pref: Preference | None, sent: Mapping[tuple[str, str], int]) -> list[Row]:
    """A row per kind and per-recipient channel sent to the person lately, or that they opted out of exactly."""
    personal = {name for name, ch in config.channels.items() if ch.per_recipient}
    # A switch changes its own kind on its own channel only: a kind that would read as a pattern, or could not
    # be stored, gets no switch.
    pairs = {p: n for p, n in sent.items() if p[1] in personal and literal_opt_out(*p)}
    for o in pref.optOuts if pref else []:
        if o.channel in personal and literal_opt_out(o.kind, o.channel) and o.kind.startswith("notification:"):
            pairs.setdefault((o.kind, o.channel), 0)
    found = [
        Row(
            row_key(kind, channel),
            kind,
            channel,
            human_kind(kind),
            count,
            on=pref is None or pref.opted_out(kind, channel) is None,
            critical=critical(config, kind),
            label=channel_label(config, channel),
        )
        for (kind, channel), count in pairs.items()
    ]
    return sorted(found, key=lambda r: (r.name.lower(), r.channel))


def other_opt_outs(config: Config, pref: Preference | None, shown: Sequence[Row]) -> list[str]:
    """The person's opt-outs that no row shows exactly (a glob, every channel): named, so nothing is hidden."""
    exact = {(r.kind, r.channel) for r in shown}
    others = [o for o in (pref.optOuts if pref else []) if (o.kind, o.channel) not in exact]
    return [f"{o.kind} on {channel_label(config, o.channel)}" for o in others]


def apply_switches(pref: Preference, shown: Sequence[Row], form: Sequence[tuple[str, str]]) -> None:
    """The rows the form showed, switched as it says; rows it did not show (new since) stay as they are."""
    posted = {v for k, v in form if k == "row"}
    on = {v for k, v in form if k == "on"}
    for row in shown:
        if row.key not in posted or row.critical:
            continue
        if row.key in on:
            pref.without_opt_out(row.kind, row.channel)
        else:
            pref.with_opt_out(row.kind, row.channel)


@dataclass
class HoursForm:
    set: bool = False
    days: list[str] = field(default_factory=lambda: list(DAYS[:5]))
    start: str = DEFAULT_HOURS[0]
    end: str = DEFAULT_HOURS[1]
    zone: str = "UTC"
    more: bool = False  # set in more detail than the form shows


def hours_form(active: list[dict[str, Any]] | None) -> HoursForm:
    """The person's active hours as the form shows them (its first period)."""
    if not active:
        return HoursForm(set=active is not None)
    first = active[0]
    times = first.get("times") or []
    form = HoursForm(set=True, zone=first.get("location") or "UTC")
    if times:
        form.start, form.end = times[0]["start_time"], times[0]["end_time"]
        if len(times) == 2 and times[0]["end_time"] == "24:00" and times[1]["start_time"] == "00:00":
            form.end = times[1]["end_time"]  # an overnight range, as the form wrote it
    # Stored active hours were validated: each range of weekdays reads (as the config reads it).
    ranges = [parse_weekdays(w) for w in first.get("weekdays") or []]
    form.days = [d for d in DAYS if any(lo <= WEEKDAYS.index(d) <= hi for lo, hi in ranges)] or list(DAYS)
    simple_times = len(times) <= 1 or form.end != times[0]["end_time"]
    form.more = len(active) > 1 or not simple_times or any(first.get(k) for k in ("days_of_month", "months", "years"))
    return form


def hours_from_form(form: Sequence[tuple[str, str]]) -> list[dict[str, Any]] | None:
    """The active hours the form asks for (None: any time); ValueError saying what is wrong."""
    values = dict(form)
    if values.get("hours", "any") != "set":
        return None
    days = [d for k, d in form if k == "day" and d in DAYS]
    if not days:
        raise ValueError("Choose at least one day, or choose Any time.")
    start, end, zone = values.get("start", ""), values.get("end", ""), values.get("zone", "").strip() or "UTC"
    if zone not in iana_zones():
        shown = zone if len(zone) <= 60 else zone[:59] + "…"
        raise ValueError(f"The time zone “{shown}” is not one of the list: choose your time zone from the list.")
    times = [{"start_time": start, "end_time": "24:00" if end == "00:00" else end}]
    if end != "00:00" and end < start:  # overnight, 22:00 to 06:00: two ranges of the day
        times = [{"start_time": start, "end_time": "24:00"}, {"start_time": "00:00", "end_time": end}]
    period: dict[str, Any] = {"times": times, "location": zone}
    if len(days) < len(DAYS):
        period["weekdays"] = days
    try:
        checked = TimePeriodConfig.model_validate(period)
    except ValidationError as exc:
        problem = exc.errors(include_url=False)[0]
        where = "time zone" if "location" in problem["loc"] else "hours"
        raise ValueError(f"The {where} cannot be used: {str(problem['msg']).removeprefix('Value error, ')}") from None
    return [checked.model_dump(exclude_defaults=True)]


# The areas of the IANA list's own zones (its other names are aliases: `US/Eastern`, `Etc/GMT+5`, `Japan`).
AREAS = ("Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific")


@lru_cache(maxsize=1)
def _zone_groups() -> tuple[tuple[str, tuple[str, ...]], ...]:
    zones = sorted(z for z in iana_zones() if z.partition("/")[0] in AREAS and "/" in z)
    return tuple((area, tuple(z for z in zones if z.startswith(area + "/"))) for area in AREAS)


def zone_choices(current: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """The page's time zones, (area, [(zone, label)]), `UTC` first, with the person's own (an alias, say)."""
    groups = [("", [("UTC", "UTC")])]
    groups += [(area, [(z, z.replace("_", " ")) for z in zones]) for area, zones in _zone_groups()]
    if current != "UTC" and current in iana_zones() and all(current not in dict(g) for _, g in groups):
        groups.append(("Other", [(current, current.replace("_", " "))]))
    return groups
