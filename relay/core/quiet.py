"""Quiet hours: whether a route's time intervals hold a delivery, and until when. Pure: config, the route a
delivery names and the time in; the instant it may go out (or None: now) out (relay.config.time_intervals)."""

from __future__ import annotations

from datetime import datetime

from relay.config import Config, RouteConfig
from relay.config.time_intervals import hold_until


def route_named(config: Config, label: str | None) -> RouteConfig | None:
    """The route a delivery names (`relay.core.routing.route_label`): by its name, else `routes[i]`."""
    if not label:
        return None
    for route in config.routes:
        if route.name == label:
            return route
    if label.startswith("routes[") and label.endswith("]") and label[7:-1].isdigit():
        index = int(label[7:-1])
        if index < len(config.routes) and config.routes[index].name is None:
            return config.routes[index]
    return None


def held_until(config: Config, route_label: str | None, now: datetime) -> datetime | None:
    """None: now (also for a route with no intervals, or no longer configured)."""
    route = route_named(config, route_label)
    if route is None or not (route.active_time_intervals or route.mute_time_intervals):
        return None
    active = config.intervals(route.active_time_intervals) if route.active_time_intervals else None
    return hold_until(now, active, config.intervals(route.mute_time_intervals))
