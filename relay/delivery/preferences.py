"""The preference stages of the pipeline: at planning, each person's choices applied to the deliveries
addressed to them (relay.core.preferences); at sending, the links that let them choose (their preference
page, one-click unsubscribe) in the template's context and the e-mail's headers (RFC 8058)."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode

from relay.core.model import Delivery, Notification, State
from relay.core.preferences import Hold, Skip, apply, critical, effect, person_of_delivery
from relay.core.quiet import held_until
from relay.delivery.channels import EMAIL_SCHEMES, scheme_of
from relay.delivery.context import Context
from relay.storage.preferences import Preferences
from relay.web.links import preferences_url, unsubscribe_url

log = logging.getLogger("relay.delivery.preferences")
SKIPS = "relay_preference_skips_total"
ONE_CLICK = "List-Unsubscribe=One-Click"


def apply_preferences(rt: Context, notification: Notification, planned: list[Delivery]) -> None:
    """Skip or hold the planned deliveries that their people's preferences say to (after the routes' own
    holds); note what each person was sent, for their page. One read of Redis for everyone's preferences."""
    config = rt.config
    people = {r.id: p for r in planned if (p := person_of_delivery(config, notification, r)) is not None}
    if not people:
        return
    store = Preferences(rt.redis)
    found = store.get_many(people.values())
    at = rt.clock()
    sent: list[tuple[str, str, str]] = []
    for record in planned:
        person = people.get(record.id)
        if person is None:
            continue
        route = record.route

        def route_until(instant: datetime, route: str | None = route) -> datetime | None:
            return held_until(config, route, instant)

        result = effect(config, found.get(person), record, at, route_until)
        apply(record, result)
        if isinstance(result, Skip):
            rt.store.incr(SKIPS, kind=record.kind, channel=record.channel)
        sent.append((person, record.kind, record.channel))
    store.note_sent(sent, at)


def person_hold(rt: Context, record: Delivery, at: float) -> float | None:
    """When a held delivery may go under its person's active hours and its route's intervals together, asked
    anew at `at` (a config reload re-plans held deliveries: relay.delivery.holding); None when its person has
    no active hours (or it is no person's)."""
    event = rt.store.event(record.eventId)
    if event is None:
        return None
    notification = Notification.model_validate_json(event.payload)
    person = person_of_delivery(rt.config, notification, record)
    pref = Preferences(rt.redis).get(person) if person is not None else None
    if pref is None or pref.activeHours is None:
        return None
    config = rt.config
    fresh = replace(record, state=State.QUEUED, notBefore=None)
    result = effect(config, pref, fresh, at, lambda instant: held_until(config, record.route, instant))
    return result.until if isinstance(result, Hold) else None


def links(rt: Context, notification: Notification, record: Delivery) -> dict[str, Any]:
    """`preferences_url` and `unsubscribe_url` for a delivery to one person (none without a public URL)."""
    prefs = rt.config.preferences
    if not prefs.links or record.items:
        return {}
    person = person_of_delivery(rt.config, notification, record)
    if person is None:
        return {}
    at = rt.clock()
    found = {"preferences_url": preferences_url(prefs, person, at)}
    if not critical(rt.config, record.kind):  # a critical kind goes whatever one chooses: nothing to unsubscribe
        found["unsubscribe_url"] = unsubscribe_url(prefs, person, record.kind, record.channel, at)
    return {k: v for k, v in found.items() if v is not None}


def with_unsubscribe_headers(url: str, context: dict[str, Any]) -> str:
    """An e-mail channel's URL (already aimed at its recipient) with RFC 8058's headers for this delivery,
    through Apprise's `+Header=value` arguments; any other URL, or no link, as it is."""
    link = context.get("unsubscribe_url")
    if not link or scheme_of(url) not in EMAIL_SCHEMES:
        return url
    base, _, query = url.partition("?")
    pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if not k.lower().startswith("+list-unsub")]
    pairs += [("+List-Unsubscribe", f"<{link}>"), ("+List-Unsubscribe-Post", ONE_CLICK)]
    return base + "?" + urlencode(pairs, safe="@")
