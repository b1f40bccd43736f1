"""Reading the notifications stored (`relay.storage.records` names their keys): each read isolated, so that one
event that cannot be read (a key of another type, a hash relay did not write) is logged and left out, and takes
no page, listing or other event down. An event's record holds its deliveries' ids."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from redis import Redis

from relay.storage.records import EventRecord, event_from_hash, event_key

log = logging.getLogger("relay.storage")


def _event(event_id: str, data: Any) -> EventRecord | None:
    """The event `event_id` in an answer to its HGETALL; None when there is none, or when it cannot be read
    (logged)."""
    key = event_key(event_id)
    if isinstance(data, Exception):
        log.error("event unreadable at %s (%s): left out", key, data, extra={"eventId": event_id})
        return None
    try:
        return event_from_hash(data, event_id)
    except (KeyError, ValueError, TypeError) as exc:
        log.error("event unreadable at %s (%s): left out", key, type(exc).__name__, extra={"eventId": event_id})
        return None


def read_events(redis: Redis, event_ids: Iterable[str]) -> dict[str, EventRecord]:
    """The events of these ids that are still stored and readable, in one round trip."""
    ids = list(dict.fromkeys(event_ids))
    if not ids:
        return {}
    pipe = redis.pipeline(transaction=False)
    for i in ids:
        pipe.hgetall(event_key(i))
    answers = pipe.execute(raise_on_error=False)
    found = {i: _event(i, answer) for i, answer in zip(ids, answers, strict=True)}
    return {i: record for i, record in found.items() if record is not None}


def read_delivery_ids(redis: Redis, event_id: str) -> list[str]:
    """The ids of the event's deliveries in the order they were stored (none of an event that cannot be read)."""
    record = read_events(redis, [event_id]).get(event_id)
    return record.deliveries if record is not None else []


def read_delivery_page(redis: Redis, event_id: str, start: int, count: int) -> tuple[list[str], int]:
    """`count` of the event's delivery ids from the `start`-th (in the order they were planned: ids are only
    added, at the end, so a position stays valid) and how many it has. Each page reads every id (26 bytes
    each: 0.5 MB for the default `max_deliveries`), in one round trip."""
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
    its count of deliveries, in one round trip."""
    events = read_events(redis, event_ids)
    stored = [events[i] for i in event_ids if i in events]
    return [EventSummary(event, event.deliveries[:first], len(event.deliveries)) for event in stored]
