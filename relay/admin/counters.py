"""The one reader of relay's counters (`relay.storage.tally`), the queue and the workers: /metrics and the admin
page both read them here."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

from redis import Redis

from relay.outages.store import ChannelStates
from relay.silences.store import SILENCES, readable
from relay.storage.exemplars import EXEMPLARS, Exemplar, parse
from relay.storage.leases import EVENT, LEASES, READY, UNPLANNED
from relay.storage.store import FAILED, HELD, Store


def parse_field(field: str) -> tuple[str, dict[str, str]]:
    """A counter's field in the hash (`name|label=value,...`) as its name and labels."""
    name, _, raw = field.partition("|")
    return name, dict(pair.split("=", 1) for pair in raw.split(",") if "=" in pair)


@dataclass(frozen=True)
class Counters:
    """One reading: every counter as stored (`name|label=value,...` -> value) and the gauges of the fleet's state,
    by their metric's name (none in a worker's own reading)."""

    series: dict[str, float]
    gauges: dict[str, int] = dataclasses.field(default_factory=dict)
    # With tracing on: per latency bucket (its stored field), the trace of the last delivery counted in it.
    exemplars: dict[str, Exemplar] = dataclasses.field(default_factory=dict)
    channels_up: dict[str, float] = dataclasses.field(default_factory=dict)  # channel -> 1 up, 0 down (outages)

    def labelled(self) -> Iterator[tuple[str, dict[str, str], float]]:
        for field, value in self.series.items():
            name, labels = parse_field(field)
            yield name, labels, value

    def total(self, name: str, **labels: str) -> float:
        """The sum of a counter over the label sets that have `labels`."""
        return sum(
            value
            for n, have, value in self.labelled()
            if n == name and all(have.get(k) == v for k, v in labels.items())
        )


class CounterReader:
    def __init__(self, redis: Redis, store: Store) -> None:
        # The store's clock: what is due, which silences are active.
        self.redis, self.store, self.clock = redis, store, store.clock

    def own(self) -> Counters:
        """A worker's /metrics: this process's counts with the exemplars, no gauge of the fleet's. RedisError."""
        return Counters(self.store.counts.read(self.redis), exemplars=parse(self.redis.hgetall(EXEMPLARS)))

    def read(self, scrape: bool = False) -> Counters:
        """The fleet's counts (the page), or with `scrape` this process's own, with the fleet's silences and
        channel states. RedisError."""
        series = self.store.counts.read(self.redis) if scrape else self.store.counters()
        at_clock = self.clock()
        at = repr(at_clock)
        pipe = self.redis.pipeline(transaction=False)
        pipe.zcount(UNPLANNED, "-inf", at)
        pipe.zcount(READY, "-inf", at)
        pipe.zcard(FAILED)
        pipe.zcard(HELD)
        pipe.zcard(UNPLANNED)
        pipe.hkeys(LEASES)
        pipe.hgetall(EXEMPLARS)
        if scrape:
            pipe.hgetall(SILENCES)
        due_events, due_deliveries, failed, held, waiting, leased, stored, *silences = pipe.execute()
        planning = sum(1 for unit in leased if unit.startswith(EVENT.encode()))
        gauges = {
            # The queue's depth is the work due and not taken yet (`relay.storage.leases`), notifications to plan
            # and deliveries to send alike: what an autoscaler should see grow under a backlog.
            "relay_queue_depth": int(due_events) + int(due_deliveries),
            "relay_deliveries_failed_kept": int(failed),
            "relay_deliveries_held": int(held),
            "relay_notifications_unplanned": int(waiting) + planning,
            "relay_workers_alive": len(self.store.live_workers()),
        }
        if not scrape:
            return Counters(series, gauges, parse(stored))
        gauges["relay_silences_active"] = sum(1 for s in readable(silences[0]) if s.active(at_clock))
        return Counters(series, gauges, parse(stored), ChannelStates(self.redis).up())  # the fleet's state in Redis
