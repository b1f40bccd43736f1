"""Reading the notifications stored (`relay.storage.records` names their keys): each read isolated, so that one
event that cannot be read (a key of another type, a hash relay did not write, an earlier relay's layout) is
logged and left out, and takes no page, listing or other event down. An event whose id holds `%` or `:` is
read where an earlier relay stored it too, when today's keys hold nothing (`relay.storage.records.key_part`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from redis import Redis

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
        record = event_from_hash(data)
    except (KeyError, ValueError, TypeError) as exc:
        log.error("event unreadable at %s (%s): left out", key, type(exc).__name__, extra={"eventId": event_id})
        return None
    return record if record is not None and record.eventId == event_id else None


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


def _ids(event_id: str, key: str, answer: Any) -> list[str]:
    if isinstance(answer, Exception):
        log.error("delivery list unreadable at %s (%s): read as empty", key, answer, extra={"eventId": event_id})
        return []
    return [_text(v) for v in answer]


def _legacy_lists(redis: Redis, event_ids: list[str]) -> dict[str, str]:
    """The delivery list keys an earlier relay gave these events, of those it stored (found at their raw key
    and not at today's): today's list of `a:b` is where an earlier relay listed the deliveries of `a%3Ab`."""
    legacy = {i: k for i in event_ids if (k := legacy_keys(i)) is not None}
    if not legacy:
        return {}
    pipe = redis.pipeline(transaction=False)
    for i, keys in legacy.items():
        pipe.exists(event_key(i))
        pipe.hget(keys.event, "eventId")
    answers = pipe.execute(raise_on_error=False)
    found = {}
    for n, (i, keys) in enumerate(legacy.items()):
        today, stored_as = answers[2 * n], answers[2 * n + 1]
        if today == 0 and not isinstance(stored_as, Exception) and stored_as is not None and _text(stored_as) == i:
            found[i] = keys.deliveries
    return found


def read_delivery_ids(redis: Redis, event_id: str) -> list[str]:
    """The ids of the event's deliveries in the order they were stored (none when its list cannot be read)."""
    keys = [event_deliveries_key(event_id), *_legacy_lists(redis, [event_id]).values()]
    pipe = redis.pipeline(transaction=False)
    for key in keys:
        pipe.lrange(key, 0, -1)
    answers = pipe.execute(raise_on_error=False)
    return list(dict.fromkeys(i for key, a in zip(keys, answers, strict=True) for i in _ids(event_id, key, a)))


def read_delivery_page(redis: Redis, event_id: str, start: int, count: int) -> tuple[list[str], int]:
    """`count` of the event's delivery ids from the `start`-th (in the order they were planned: the list only
    grows, so a position stays valid) and how many it has; none when its list cannot be read."""
    if _legacy_lists(redis, [event_id]):  # an earlier relay's event: its lists are merged, rare and small
        ids = read_delivery_ids(redis, event_id)
        return ids[start : start + count], len(ids)
    key = event_deliveries_key(event_id)
    pipe = redis.pipeline(transaction=False)
    pipe.lrange(key, start, start + count - 1)
    pipe.llen(key)
    listed, total = pipe.execute(raise_on_error=False)
    ids = _ids(event_id, key, listed)  # a list of another type: logged, and read as empty
    return ids, total if isinstance(total, int) else len(ids)


@dataclass
class EventSummary:
    """What the admin page lists of an event: the event, its first deliveries' ids and how many it has."""

    event: EventRecord
    first: list[str] = field(default_factory=list)
    total: int = 0


def read_summaries(redis: Redis, event_ids: list[str], first: int) -> list[EventSummary]:
    """The events still stored and readable, in the order given, each with its first `first` delivery ids and
    its count of deliveries, in two round trips (three with events an earlier relay stored)."""
    events = read_events(redis, event_ids)
    stored = [i for i in event_ids if i in events]
    legacy = _legacy_lists(redis, stored)
    pipe = redis.pipeline(transaction=False)
    where = [(i, key) for i in stored for key in (event_deliveries_key(i), *([legacy[i]] if i in legacy else []))]
    for _, key in where:
        pipe.lrange(key, 0, first - 1)
        pipe.llen(key)
    answers = pipe.execute(raise_on_error=False) if where else []
    summaries = {i: EventSummary(events[i]) for i in stored}
    for n, (i, key) in enumerate(where):
        listed, total = answers[2 * n], answers[2 * n + 1]
        summary = summaries[i]
        summary.first = list(dict.fromkeys(summary.first + _ids(i, key, listed)))[:first]
        summary.total += total if isinstance(total, int) else 0
    return list(summaries.values())
