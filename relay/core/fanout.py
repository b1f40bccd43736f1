"""How many deliveries a notification plans, counted at intake from the routes alone (no I/O): what
`server.limits.max_deliveries` bounds. Pure, like the routing it follows (`relay.core.routing`)."""

from __future__ import annotations

from relay.config import Config
from relay.core.model import Notification
from relay.core.routing import matcher_fields, route_message


def deliveries_per_message(config: Config, notification: Notification) -> list[int]:
    """Per message: one per channel, one per recipient on a per-recipient channel (members, fallbacks uncounted)."""
    fields = matcher_fields(config, notification)
    counts = []
    for message in notification.messages:
        routing = route_message(config, notification.kind, message, fields)
        channels = dict.fromkeys(name for route in routing.routes for name in route.channels)
        per_recipient = sum(1 for name in channels if config.channels[name].per_recipient)
        counts.append(len(channels) - per_recipient + per_recipient * len(message.recipients))
    return counts
