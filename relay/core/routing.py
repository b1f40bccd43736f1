"""Routes: which channels get each message of a notification. Pure: config, payload and time in, deliveries out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from relay.config import Config, DefaultRoute, RouteConfig
from relay.config.matchers import all_match
from relay.core.model import Delivery, Message, Notification, State, delivery_id, kind_name, recipient_type_name
from relay.core.recipients import catalog_ref, email_of, reference_of, resolve_recipient_type, valid_email


def _matches(patterns: list[str], value: str, short: str) -> bool:
    # Operators may write globs with or without the `notification:` / `recipient-type:` prefix.
    return any(fnmatchcase(value, p) or fnmatchcase(short, p) for p in patterns)


DEFAULT_ROUTE = "default"


def route_label(config: Config, index: int | None) -> str:
    """How a delivery names the route it came from: the route's name, else `routes[i]`, or `default`."""
    if index is None:
        return DEFAULT_ROUTE
    return config.routes[index].name or f"routes[{index}]"


def matcher_view(notification: Notification) -> dict[str, Any]:
    """What a route's matchers read: the notification's kind, sender, body and metadata as received."""
    return {
        "kind": notification.kind,
        "sender": notification.sender,
        "body": notification.body,
        "metadata": notification.metadata.model_dump(),
    }


def matcher_fields(config: Config, notification: Notification) -> dict[str, Any] | None:
    """The notification's fields as the routes' matchers read them, or None when no route has a matcher."""
    return matcher_view(notification) if any(r.compiled_matchers for r in config.routes) else None


def route_matches(
    route: RouteConfig, kind: str, recipient_type: str | None, fields: Mapping[str, Any] | None = None
) -> bool:
    """`fields`: the notification as matchers read it (`matcher_view`); a route with matchers needs it."""
    if not route_names(route, kind, recipient_type):
        return False
    return not route.compiled_matchers or (fields is not None and all_match(route.compiled_matchers, fields))


def route_names(route: RouteConfig, kind: str, recipient_type: str | None) -> bool:
    """The route's kinds and recipient types take this kind and type (its matchers aside)."""
    if not _matches(route.kinds, kind, kind_name(kind)):
        return False
    if recipient_type is None:
        return route.recipient_types == ["*"]
    return _matches(route.recipient_types, recipient_type, recipient_type_name(recipient_type))


@dataclass(frozen=True)
class MessageRouting:
    recipient_type: str | None
    routes: list[RouteConfig | DefaultRoute]
    # Per route taken: its index in `routes` (None: the default route).
    indexes: tuple[int | None, ...]


def route_message(
    config: Config, kind: str, message: Message, fields: Mapping[str, Any] | None = None
) -> MessageRouting:
    """The recipient type and the routes it takes (those whose matchers all match `fields`)."""

    def routed(candidate: str) -> bool:
        return any(route_matches(r, kind, candidate, fields) for r in config.routes)

    rtype = resolve_recipient_type(message.recipientType, message.recipientType_v2, routed)
    chosen: list[RouteConfig | DefaultRoute] = []
    indexes: list[int | None] = []
    for i, route in enumerate(config.routes):
        if route_matches(route, kind, rtype, fields):
            chosen.append(route)
            indexes.append(i)
            if not route.continue_:
                break
    if not chosen:
        return MessageRouting(rtype, [config.default], (None,))
    return MessageRouting(rtype, chosen, tuple(indexes))


def _skip_reason(raw_email: str | None) -> str:
    if raw_email is None:
        return "recipient has no e-mail address"
    shown = raw_email if len(raw_email) <= 80 else raw_email[:77] + "..."
    return f"recipient e-mail address is not valid: {shown!r}"


def _new(
    event_id: str,
    at: float,
    config: Config,
    kind: str,
    index: int,
    recipient_type: str | None,
    route: RouteConfig | DefaultRoute,
    label: str,
    channel: str,
    recipient_index: int | None = None,
    recipient: str | None = None,
    address: str | None = None,
) -> Delivery:
    return Delivery(
        id=delivery_id(event_id, index, channel, recipient_index),
        eventId=event_id,
        kind=kind,
        messageIndex=index,
        channel=channel,
        template=route.template,
        maxAttempts=config.retry.attempts,
        createdAt=at,
        updatedAt=at,
        recipientType=recipient_type,
        recipient=recipient,
        address=address,
        recipientIndex=recipient_index,
        fallback=list(route.fallback),
        route=label,
    )


def plan_notification(config: Config, notification: Notification, event_id: str, at: float) -> list[Delivery]:
    """Every delivery the notification needs, skipped ones included, in a stable order, made `at`."""
    plan: list[Delivery] = []
    # With the platform configured, a recipient without a usable e-mail is looked up when sent.
    can_look_up = bool(config.platform.url)
    # Matchers only choose among the configured routes: no value read here reaches a target.
    fields = matcher_fields(config, notification)
    for index, message in enumerate(notification.messages):
        routing = route_message(config, notification.kind, message, fields)
        planned = len(plan)
        seen_channels: set[str] = set()
        for route, route_index in zip(routing.routes, routing.indexes, strict=True):
            for name in route.channels:
                if name in seen_channels:
                    continue
                seen_channels.add(name)
                label = route_label(config, route_index)
                to = (event_id, at, config, notification.kind, index, routing.recipient_type, route, label, name)
                if not config.channels[name].per_recipient:
                    plan.append(_new(*to))
                    continue
                addresses: set[str] = set()
                for r_index, recipient in enumerate(message.recipients):
                    raw = email_of(recipient)
                    ref = reference_of(recipient)
                    if raw is not None and valid_email(raw):
                        if raw.lower() in addresses:
                            continue
                        addresses.add(raw.lower())
                        plan.append(_new(*to, r_index, ref or raw, raw))
                    elif can_look_up and catalog_ref(recipient):
                        plan.append(_new(*to, r_index, catalog_ref(recipient)))  # no address yet: `Delivery.lookup`
                    else:
                        skipped = _new(*to, r_index, ref)
                        skipped.state, skipped.lastError = State.SKIPPED, _skip_reason(raw)
                        plan.append(skipped)
        v2 = message.recipientType_v2
        for record in plan[planned:]:  # its record says which message it came from, when two share a type
            record.fellBackFrom = v2 if v2 and v2 != routing.recipient_type else None
    return plan
