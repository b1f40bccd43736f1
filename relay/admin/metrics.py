"""/metrics through prometheus-client, read from Redis at each scrape: the counts of this process (its own hash,
`relay.storage.tally`; serve's with its workers'), so that summed over every scraped process each counter is
the fleet's; and the gauges of the fleet's state, the same in every API process (take their max(), not
their sum())."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import NamedTuple

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    UnknownMetricFamily,
)
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.samples import Exemplar
from redis.exceptions import RedisError

from relay.admin.counters import Counters
from relay.storage.store import LATENCY_BUCKETS

HELP = {
    "relay_notifications_received_total": ("counter", "Notifications accepted (durable, 202 accepted)."),
    "relay_notifications_duplicate_total": ("counter", "Notifications answered 202 duplicate (eventId seen)."),
    "relay_notifications_rejected_total": ("counter", "Webhook calls refused, by HTTP status and reason."),
    "relay_deliveries_total": ("counter", "Delivery state changes, by state, channel, kind and failure reason."),
    "relay_template_fallbacks_total": ("counter", "Renders that fell back to the platform's text."),
    "relay_replays_total": ("counter", "Failed deliveries requeued by a replay."),
    "relay_preference_skips_total": (
        "counter",
        "Deliveries skipped because their person opted out of the kind on the channel, by kind and channel.",
    ),
    "relay_releases_total": ("counter", "Held deliveries sent early by a release."),
    "relay_silenced_total": ("counter", "Deliveries a silence held or skipped, by action (hold, skip)."),
    "relay_silences_active": ("gauge", "Silences active right now."),
    "relay_catalog_lookups_total": ("counter", "Platform catalog look-ups, by result (cache_hit, fetched, ...)."),
    "relay_delivery_latency_seconds": ("histogram", "From acceptance of the notification to delivery."),
    "relay_send_duration_seconds": ("histogram", "One send through Apprise (any outcome), by channel."),
    "relay_queue_depth": (
        "gauge",
        "Work due and not yet taken by a worker: notifications to plan and deliveries due now.",
    ),
    "relay_deliveries_failed_kept": ("gauge", "Failed deliveries kept for inspection and replay."),
    "relay_deliveries_held": (
        "gauge",
        "Deliveries held by quiet hours, in a digest or for their down channel right now (state held).",
    ),
    "relay_notifications_unplanned": ("gauge", "Accepted notifications not yet planned into deliveries."),
    "relay_planning_given_up_total": (
        "counter",
        "Notifications whose planning crashed, or whose worker died planning them, three times (see the log).",
    ),
    "relay_workers_alive": ("gauge", "Workers whose last heartbeat is at most dead_worker_after (45 s) old."),
    "relay_embedded_redis_restarts_total": (
        "counter",
        "Times `relay serve` started its embedded Redis again after it died (kept in that Redis).",
    ),
    "relay_auth_failures_total": (
        "counter",
        "Refused credentials, by endpoint (webhook, api, ui, preferences, unsubscribe).",
    ),
    "relay_auth_throttled_total": (
        "counter",
        "Calls answered 429 because their client address sent too many refused credentials (server.auth_failures).",
    ),
    "relay_channel_up": ("gauge", "1 while a channel is up, 0 while it is down (an outage: its deliveries wait)."),
    "relay_up": ("gauge", "1 when Redis answered this scrape."),
}
# Unlabelled counters shown at 0 before their first increment, so that an alert on their increase sees the first.
ZERO_FROM_THE_START = ("relay_auth_throttled_total",)
_FAMILIES: dict[str, Callable[[str, str], Metric]] = {
    "counter": CounterMetricFamily,
    "histogram": HistogramMetricFamily,
}
_BOUNDS = [f"{b:g}" for b in LATENCY_BUCKETS] + ["+Inf"]
Labels = tuple[tuple[str, str], ...]


class Sample(NamedTuple):
    name: str
    labels: Labels
    value: float
    exemplar: Exemplar | None = None


def _samples(counters: Counters) -> dict[str, list[Sample]]:
    """Samples by family; a histogram's per-bucket counts (`<name>_slot`) become its cumulative `<name>_bucket`
    series, +Inf included, in the order of their bounds, each with its bucket's exemplar when there is one."""
    samples: dict[str, list[Sample]] = defaultdict(list)
    slots: dict[tuple[str, Labels], dict[str, float]] = defaultdict(dict)
    found: dict[tuple[str, Labels, str], Exemplar] = {}
    for (name, labels, value), field in zip(counters.labelled(), counters.series, strict=True):
        family, _, part = name.rpartition("_")  # a histogram's series: <name>_slot, <name>_count, <name>_sum
        if HELP.get(family, ("",))[0] != "histogram":
            samples[name].append(Sample(name, tuple(sorted(labels.items())), value))
        elif part != "slot" or labels.get("le") not in _BOUNDS:
            samples[family].append(Sample(name, tuple(sorted(labels.items())), value))
        else:
            le = labels.pop("le")
            rest = tuple(sorted(labels.items()))
            counts = slots[(family, rest)]
            counts[le] = counts.get(le, 0.0) + value
            stored = counters.exemplars.get(field)
            if stored is not None:
                found[(family, rest, le)] = Exemplar({"trace_id": stored.trace_id}, stored.value, stored.timestamp)
    for (family, rest), counts in slots.items():
        total = 0.0
        for le in _BOUNDS:
            total += counts.get(le, 0.0)
            samples[family].append(
                Sample(family + "_bucket", (*rest, ("le", le)), total, found.get((family, rest, le)))
            )
    return samples


def _order(sample: Sample) -> tuple[str, Labels]:
    """By name and labels but a bucket's bound: a stable sort keeps a histogram's buckets in their order."""
    return sample.name, tuple(p for p in sample.labels if p[0] != "le")


class RelayCollector(Collector):
    """With Redis down: no counter (one shown at 0 would look like a reset), and relay_up 0 from an API process."""

    def __init__(self, read: Callable[[], Counters], fleet: bool = True) -> None:
        self.read, self.fleet = read, fleet

    def collect(self) -> Iterator[Metric]:
        try:
            counters = self.read()
        except RedisError:
            if self.fleet:
                yield GaugeMetricFamily("relay_up", HELP["relay_up"][1], value=0.0)
            return
        samples = _samples(counters)
        for name in ZERO_FROM_THE_START:
            samples.setdefault(name, [Sample(name, (), 0.0)])
        gauges = {"relay_up": 1.0, **counters.gauges} if self.fleet else {}
        for name in sorted(set(HELP) | set(samples)):
            kind, text = HELP.get(name, ("untyped", name))
            if kind == "gauge":
                if name in gauges:
                    yield GaugeMetricFamily(name, text, value=gauges[name])
                elif name == "relay_channel_up" and self.fleet:  # no sample before a first send
                    gauge = GaugeMetricFamily(name, text, labels=["channel"])
                    for channel, up in sorted(counters.channels_up.items()):
                        gauge.add_metric([channel], up)
                    yield gauge
                continue
            family = _FAMILIES.get(kind, UnknownMetricFamily)(name, text)
            for sample in sorted(samples.get(name, []), key=_order):
                family.add_sample(sample.name, dict(sample.labels), sample.value, exemplar=sample.exemplar)
            yield family


def metrics_registry(read: Callable[[], Counters], fleet: bool = True) -> CollectorRegistry:
    """relay's own registry, not the process-wide one; `fleet` False (a worker): the counts alone."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RelayCollector(read, fleet))
    return registry
