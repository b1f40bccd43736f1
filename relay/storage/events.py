"""Reading the notifications stored (`relay.storage.records` names their keys): each read isolated, so that one
event that cannot be read (a key of another type, a hash relay did not write) is logged and left out, and takes
no page, listing or other event down. An event's record holds its deliveries' ids."""

from __future__ import annotations

import logging
from collections.abc import Iterable
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
