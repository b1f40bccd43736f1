"""Exemplars of the latency histograms: per bucket, the trace of the last delivery counted in it, so that a
scrape in OpenMetrics format links a slow bucket to a trace (README, "Tracing"). Written only with tracing
on; the histograms themselves are counted with the delivery's state (`relay.storage.store`)."""

from __future__ import annotations

from dataclasses import dataclass

from redis import Redis

from relay.storage.records import PREFIX, _text, bucket_field

EXEMPLARS = PREFIX + "exemplars"  # hash: a histogram's bucket field -> "trace_id value timestamp"


@dataclass(frozen=True)
class Exemplar:
    trace_id: str
    value: float
    timestamp: float


def note(redis: Redis, trace_id: str, at: float, observations: list[tuple[str, float, dict[str, str]]]) -> None:
    """One round trip: each observation (histogram, seconds, labels) becomes its bucket's exemplar."""
    fields = {
        bucket_field(name, seconds, **labels): f"{trace_id} {seconds!r} {at!r}"
        for name, seconds, labels in observations
    }
    redis.hset(EXEMPLARS, mapping=fields)  # type: ignore[arg-type]


def parse(stored: dict[bytes | str, bytes | str]) -> dict[str, Exemplar]:
    """The exemplars as HGETALL read them, by bucket field (a malformed one is left out)."""
    found = {}
    for field, value in stored.items():
        parts = _text(value).split()
        if len(parts) == 3:
            try:
                found[_text(field)] = Exemplar(parts[0], float(parts[1]), float(parts[2]))
            except ValueError:
                continue
    return found
