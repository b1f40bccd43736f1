"""Deliveries per minute by the state they came to, for the admin page's chart of the last hour (docs/operations.md):
counted in the store's own transaction (`Store.update_many`), with the state change itself, so the chart and the
records agree; one hash a minute, gone two hours after its last count."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from redis import Redis
from redis.client import Pipeline

from relay.storage.records import PREFIX, _text

ACTIVITY = PREFIX + "activity:"
ACTIVITY_TTL = 7200  # seconds: the chart reads one hour back
HOUR_MINUTES = 60


def count_activity(pipe: Pipeline, reached: Counter[str], at: float) -> None:
    """Count the states reached (each delivery's new one) in `at`'s minute, in the store's transaction `pipe`."""
    if reached:
        key = f"{ACTIVITY}{int(at // 60)}"
        for state, n in sorted(reached.items()):
            pipe.hincrby(key, state, n)
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
