"""Prometheus text exposition of the counters every relay process keeps in Redis."""

from __future__ import annotations

from collections import defaultdict

from relay.storage.store import LATENCY_BUCKETS

HELP = {
    "relay_notifications_received_total": ("counter", "Notifications accepted (durable, 202 accepted)."),
    "relay_notifications_duplicate_total": ("counter", "Notifications answered 202 duplicate (eventId seen)."),
    "relay_notifications_rejected_total": ("counter", "Webhook calls refused, by HTTP status and reason."),
    "relay_deliveries_total": ("counter", "Delivery state changes, by state, channel, kind and failure reason."),
    "relay_template_fallbacks_total": ("counter", "Renders that fell back to the platform's text."),
    "relay_replays_total": ("counter", "Failed deliveries requeued by a replay."),
    "relay_catalog_lookups_total": ("counter", "Platform catalog look-ups, by result (cache_hit, fetched, ...)."),
    "relay_delivery_latency_seconds": ("histogram", "From acceptance of the notification to delivery."),
    "relay_send_duration_seconds": ("histogram", "One send through Apprise (any outcome), by channel."),
    "relay_queue_depth": ("gauge", "Jobs waiting in the relay queue."),
    "relay_deliveries_failed_kept": ("gauge", "Failed deliveries kept for inspection and replay."),
    "relay_workers_alive": ("gauge", "Workers that sent a heartbeat in the last 30 s."),
    "relay_up": ("gauge", "1 when Redis answered this scrape."),
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(raw: str) -> str:
    if not raw:
        return ""
    pairs = [p.split("=", 1) for p in raw.split(",") if "=" in p]
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}"


def _series_order(item: tuple[str, float]) -> tuple[str, str, float]:
    """Sorted by name and labels, with histogram buckets in the order of their bounds (+Inf last)."""
    name, _, labels = item[0].partition("|")
    rest, _, le = labels.rpartition("le=")
    if name.endswith("_bucket") and le:
        return name, rest, float("inf") if le == "+Inf" else float(le)
    return name, labels, 0.0


def _family(series: str) -> str:
    for suffix in ("_bucket", "_count", "_sum"):
        if series.endswith(suffix) and series[: -len(suffix)] in HELP:
            return series[: -len(suffix)]
    return series


def cumulative_buckets(counters: dict[str, float], bounds: tuple[float, ...]) -> dict[str, float]:
    """Per-bucket counts (`<name>_slot|...,le=b`, as the processes keep them) as Prometheus' cumulative
    `<name>_bucket` series, per set of other labels."""
    order = [f"{b:g}" for b in bounds] + ["+Inf"]
    groups: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    out: dict[str, float] = {}
    for field, value in counters.items():
        base, _, raw = field.partition("|")
        labels = dict(p.split("=", 1) for p in raw.split(",") if "=" in p)
        le = labels.pop("le", None)
        if not base.endswith("_slot") or le not in order:
            out[field] = value
            continue
        rest = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        slots = groups[(base.removesuffix("_slot"), rest)]
        slots[le] = slots.get(le, 0.0) + value
    for (name, rest), slots in groups.items():
        total = 0.0
        for le in order:
            total += slots.get(le, 0.0)
            out[f"{name}_bucket|{rest + ',' if rest else ''}le={le}"] = total
    return out


def exposition(counters: dict[str, float], gauges: dict[str, float]) -> str:
    counters = cumulative_buckets(counters, LATENCY_BUCKETS)
    families: dict[str, list[str]] = defaultdict(list)
    for field, value in sorted(counters.items(), key=_series_order):
        name, _, labels = field.partition("|")
        families[_family(name)].append(f"{name}{_labels(labels)} {value:g}")
    for name, value in gauges.items():
        families[name].append(f"{name} {value:g}")
    lines: list[str] = []
    for family in sorted(set(families) | {n for n, (t, _) in HELP.items() if t == "counter"}):
        kind, text = HELP.get(family, ("untyped", family))
        lines.append(f"# HELP {family} {text}")
        lines.append(f"# TYPE {family} {kind}")
        lines.extend(families.get(family, []))
    return "\n".join(lines) + "\n"
