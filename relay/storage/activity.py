"""Deliveries per minute by the state they came to, for the admin page's chart of the last hour (docs/operations.md):
counted in the store's own transaction (`Store.update_many`), with the state change itself, so the chart and the
records agree; one hash a minute, gone two hours after its last count."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from redis import Redis
from redis.client import Pipeline

from relay.core.model import Delivery, State
from relay.storage.records import PREFIX, _text

ACTIVITY = PREFIX + "activity:"
ACTIVITY_TTL = 7200  # seconds: the chart reads one hour back
HOUR_MINUTES = 60


class Change(Protocol):
    """A delivery's new state as the store writes it (`relay.storage.store.StateChange`)."""

    record: Delivery
    previous_state: State


def activity_key(at: float) -> str:
    return f"{ACTIVITY}{int(at // 60)}"


def count_activity(pipe: Pipeline, changes: Sequence[Change]) -> None:
    """Count each state reached in the minute of the last record stored, in the store's transaction `pipe`."""
    counts = Counter(c.record.state for c in changes if c.record.state != c.previous_state)
    if counts:
        key = activity_key(changes[-1].record.updatedAt)
        for state, n in sorted(counts.items()):
            pipe.hincrby(key, str(state), n)
        pipe.expire(key, ACTIVITY_TTL)


@dataclass(frozen=True)
class Minute:
    start: float  # epoch seconds at the minute's start
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def last_hour(redis: Redis, clock: float) -> list[Minute]:
    """The 60 minutes up to `clock`'s (that one included), oldest first; a minute with nothing has no counts."""
    minute = int(clock // 60)
    minutes = range(minute - HOUR_MINUTES + 1, minute + 1)
    pipe = redis.pipeline(transaction=False)
    for m in minutes:
        pipe.hgetall(f"{ACTIVITY}{m}")
    return [
        Minute(m * 60.0, {_text(k): int(v) for k, v in found.items()})
        for m, found in zip(minutes, pipe.execute(), strict=True)
    ]
