"""Routes: which channels get each message of a notification. Pure: config and payload in, plan out."""

from __future__ import annotations

from dataclasses import dataclass, replace
from fnmatch import fnmatchcase

from relay.config import Config, DefaultRoute, RouteConfig
from relay.core.model import Message, Notification, PlannedDelivery, kind_name, recipient_type_name
from relay.core.recipients import catalog_ref, email_of, reference_of, resolve_recipient_type, valid_email


def _matches(patterns: list[str], value: str, short: str) -> bool:
    # Operators may write globs with or without the `notification:` / `recipient-type:` prefix.
    return any(fnmatchcase(value, p) or fnmatchcase(short, p) for p in patterns)


def route_matches(route: RouteConfig, kind: str, recipient_type: str | None) -> bool:
    if not _matches(route.kinds, kind, kind_name(kind)):
        return False
    if recipient_type is None:
        return route.recipient_types == ["*"]
    return _matches(route.recipient_types, recipient_type, recipient_type_name(recipient_type))


@dataclass(frozen=True)
class MessageRouting:
    recipient_type: str | None
    routes: list[RouteConfig | DefaultRoute]
    is_default: bool


def route_message(config: Config, kind: str, message: Message) -> MessageRouting:
    """Resolve the recipient type (v2 when routed, else legacy) and the routes it takes."""

    def routed(candidate: str) -> bool:
        return any(route_matches(r, kind, candidate) for r in config.routes)

    rtype = resolve_recipient_type(message.recipientType, message.recipientType_v2, routed)
    chosen: list[RouteConfig | DefaultRoute] = []
    for route in config.routes:
        if route_matches(route, kind, rtype):
            chosen.append(route)
            if not route.continue_:
                break
    if not chosen:
        return MessageRouting(rtype, [config.default], True)
    return MessageRouting(rtype, chosen, False)


def _skip_reason(raw_email: str | None) -> str:
    if raw_email is None:
        return "recipient has no e-mail address"
    shown = raw_email if len(raw_email) <= 80 else raw_email[:77] + "..."
    return f"recipient e-mail address is not valid: {shown!r}"


def plan_notification(config: Config, notification: Notification) -> list[PlannedDelivery]:
    """Every delivery the notification needs, skipped ones included, in a stable order."""
    plan: list[PlannedDelivery] = []
    # With the platform configured, a recipient without a usable e-mail is looked up when sent.
    can_look_up = bool(config.platform.url)
    for index, message in enumerate(notification.messages):
        routing = route_message(config, notification.kind, message)
        seen_channels: set[str] = set()
        for route in routing.routes:
            for name in route.channels:
                if name in seen_channels:
                    continue
                seen_channels.add(name)
                channel = config.channels[name]
                audience = PlannedDelivery(
                    message_index=index,
                    recipient_type=routing.recipient_type,
                    channel=name,
                    template=route.template,
                    fallback=tuple(route.fallback),
                )
                if not channel.per_recipient:
                    plan.append(audience)
                    continue
                addresses: set[str] = set()
                for r_index, recipient in enumerate(message.recipients):
                    raw = email_of(recipient)
                    ref = reference_of(recipient)
                    if raw is not None and valid_email(raw):
                        if raw.lower() in addresses:
                            continue
                        addresses.add(raw.lower())
                        plan.append(
                            replace(
                                audience, recipient=recipient, recipient_ref=ref, address=raw, recipient_index=r_index
                            )
                        )
                    elif can_look_up and catalog_ref(recipient):
                        plan.append(
                            replace(
                                audience,
                                recipient=recipient,
                                recipient_ref=catalog_ref(recipient),
                                recipient_index=r_index,
                                lookup=True,
                            )
                        )
                    else:
                        plan.append(
                            replace(
                                audience,
                                recipient=recipient,
                                recipient_ref=ref,
                                recipient_index=r_index,
                                skip_reason=_skip_reason(raw),
                            )
                        )
    return plan
