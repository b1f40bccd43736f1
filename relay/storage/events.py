"""Reading the notifications stored (`relay.storage.records` names their keys): each read isolated, so that one
event that cannot be read (a key of another type, a hash relay did not write, an earlier relay's layout) is
logged and left out, and takes no page, listing or other event down. An event whose id holds `%` or `:` is
read where an earlier relay stored it too, when today's keys hold nothing (`relay.storage.records.key_part`).
An event's record holds its deliveries' ids; an earlier relay listed them in a list of their own, still read."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from redis import Redis
from redis.exceptions import ResponseError

from relay.storage.records import (
    EventRecord,
    _text,
    event_deliveries_key,
    event_from_hash,
    event_key,
    legacy_keys,
)

log = logging.getLogger("relay.storage")


def _event(event_id: str, key: str, data: Any) -> EventRecord | None:
    """The event `event_id` in an answer to HGETALL of `key`; None when there is none, when it is another's
    (an earlier relay's key of another event), or when it cannot be read (logged)."""
    if isinstance(data, Exception):
        # Where an earlier relay stored `X:deliveries` is the delivery list of `X` now: no news there.
        if key == event_key(event_id):
            log.error("event unreadable at %s (%s): left out", key, data, extra={"eventId": event_id})
        return None
    try:
        record = event_from_hash(data, event_id, raw_key=key != event_key(event_id))
    except (KeyError, ValueError, TypeError) as exc:
        log.error("event unreadable at %s (%s): left out", key, type(exc).__name__, extra={"eventId": event_id})
        return None
    if record is not None:
        record.key = key
    return record


def read_events(redis: Redis, event_ids: Iterable[str]) -> dict[str, EventRecord]:
    """The events of these ids that are still stored and readable, in one round trip."""
    ids = list(dict.fromkeys(event_ids))
    if not ids:
        return {}
    pipe = redis.pipeline(transaction=False)
    where: list[tuple[str, str]] = []
    for i in ids:
        legacy = legacy_keys(i)
        for key in (event_key(i), *([legacy.event] if legacy else [])):
            pipe.hgetall(key)
            where.append((i, key))
    found: dict[str, EventRecord] = {}
    for (i, key), answer in zip(where, pipe.execute(raise_on_error=False), strict=True):
        if i not in found and (record := _event(i, key, answer)) is not None:
            found[i] = record
    return found


def record_key(redis: Redis, event_id: str) -> str:
    """The key of the event's record, where its deliveries' ids are added (`relay.storage.scripts.ADD_IDS_LUA`):
    today's, unless an earlier relay stored the event at its raw key and today's holds nothing."""
    if legacy_keys(event_id) is None:
        return event_key(event_id)  # no round trip: most ids
    found = read_events(redis, [event_id]).get(event_id)
    return found.key if found is not None else event_key(event_id)


def _earlier_lists(event_id: str, record: EventRecord | None) -> list[str]:
    """Where earlier relays listed the event's deliveries (lists, read and never written now): at
    `event_deliveries_key`, and for an event stored at its raw key (before key escaping) that key's list."""
    legacy = legacy_keys(event_id)
    raw = legacy is not None and record is not None and record.key == legacy.event
    return [event_deliveries_key(event_id), *([legacy.deliveries] if legacy is not None and raw else [])]


def _ids(redis: Redis, event_id: str, key: str, answer: Any) -> list[str]:
    if isinstance(answer, Exception):
        # A hash there is an event an earlier relay stored as `X:deliveries` at the list key of X: no list.
        if not isinstance(answer, ResponseError) or redis.type(key) != b"hash":
            log.error("delivery list unreadable at %s (%s): read as empty", key, answer, extra={"eventId": event_id})
        return []
    return [_text(v) for v in answer]


def _listed(
    redis: Redis, records: Mapping[str, EventRecord | None], first: int | None = None
) -> dict[str, tuple[list[str], int]]:
    """Each event's delivery ids in the order planned (its first `first`, or all) and how many it has: those
    an earlier relay listed, then its record's; in one round trip."""
    where = [(i, key) for i, record in records.items() for key in _earlier_lists(i, record)]
    pipe = redis.pipeline(transaction=False)
    for _, key in where:
        pipe.lrange(key, 0, -1 if first is None else first - 1)
        pipe.llen(key)
    answers = pipe.execute(raise_on_error=False)
    earlier: dict[str, tuple[list[str], int]] = {i: ([], 0) for i in records}
    for n, (i, key) in enumerate(where):
        listed, total = answers[2 * n], answers[2 * n + 1]
        ids, count = earlier[i]
        earlier[i] = (ids + _ids(redis, i, key, listed), count + (total if isinstance(total, int) else 0))
    out = {}
    for i, record in records.items():
        mine = record.deliveries if record is not None else []
        ids, count = earlier[i]
        merged = list(dict.fromkeys(ids + (mine if first is None else mine[:first])))
        out[i] = (merged if first is None else merged[:first], count + len(mine))
    return out


def read_delivery_ids(redis: Redis, event_id: str) -> list[str]:
    """The ids of the event's deliveries in the order they were stored (none of a list that cannot be read)."""
    record = read_events(redis, [event_id]).get(event_id)
    return _listed(redis, {event_id: record})[event_id][0]


def read_delivery_page(redis: Redis, event_id: str, start: int, count: int) -> tuple[list[str], int]:
    """`count` of the event's delivery ids from the `start`-th (in the order they were planned: ids are only
    added, at the end, so a position stays valid) and how many it has. Each page reads every id (26 bytes
    each: 0.5 MB for the default `max_deliveries`), in two round trips."""
    ids = read_delivery_ids(redis, event_id)
    return ids[start : start + count], len(ids)


@dataclass
class EventSummary:
    """What the admin page lists of an event: the event, its first deliveries' ids and how many it has."""

    event: EventRecord
    first: list[str] = field(default_factory=list)
    total: int = 0


def read_summaries(redis: Redis, event_ids: list[str], first: int) -> list[EventSummary]:
    """The events still stored and readable, in the order given, each with its first `first` delivery ids and
    its count of deliveries, in two round trips."""
    events = read_events(redis, event_ids)
    stored = {i: events[i] for i in event_ids if i in events}
    listed = _listed(redis, stored, first)
    return [EventSummary(event, *listed[i]) for i, event in stored.items()]
