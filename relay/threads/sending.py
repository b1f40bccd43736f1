"""Conversations on the way out: keys rendered at planning (each message takes its place in its line), the
`in_order` gate's turn, the send aimed at the conversation, and the line moved on when a message stops holding it
back. A delivery with no `thread` costs none of this (no Redis round trip)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from relay.config import RouteConfig
from relay.core.model import Delivery, Notification
from relay.core.outcome import Delivered, Outcome
from relay.core.quiet import route_named
from relay.core.states import State
from relay.delivery.context import Context
from relay.threads.model import (
    MAX_KEY,
    Conversation,
    conversation_id,
    mail_headers,
    render_key,
    slack_reply_url,
    threads_on,
)
from relay.threads.store import Threads, Waits

log = logging.getLogger("relay.delivery.jobs")
RECHECK = 30.0  # seconds: a message waiting behind another is woken when it ends, or looked at again by then
SOON = 1.0  # behind a notification being planned: looked at again this soon
LIVE = frozenset({State.QUEUED, State.RETRYING})  # what holds the others of its conversation back


def threaded_route(rt: Context, record: Delivery) -> RouteConfig | None:
    """The route's thread settings when this delivery can be threaded: its channel threads; no digest."""
    route = route_named(rt.config, record.route)
    channel = rt.config.channels.get(record.channel)
    if route is None or not route.thread or route.digest is not None or channel is None:
        return None
    return route if threads_on(channel.url, channel.format) is not None else None


def key_of(rt: Context, notification: Notification, record: Delivery, source: str) -> str:
    try:
        return render_key(rt.renderer.env, source, notification, record, rt.renderer.extra)
    except Exception as exc:  # a key that does not render threads nothing; the message still goes
        log.warning(
            "thread key failed, sent unthreaded: %s: %s", type(exc).__name__, exc, extra={"deliveryId": record.id}
        )
        return ""


def plan(rt: Context, notification: Notification, records: list[Delivery], received: float) -> None:
    """Keys on the new deliveries of threaded routes, each in its conversation's line before it is stored."""
    lines: dict[str, list[str]] = {}
    ttl = 0.0
    for record in records:
        route = threaded_route(rt, record) if record.state is State.QUEUED else None
        key = key_of(rt, notification, record, route.thread or "")[:MAX_KEY] if route is not None else ""
        if route is not None and key:
            record.thread = {"key": key}
            lines.setdefault(_cid(record), []).append(record.id)
            ttl = max(ttl, route.thread_for)
    if lines:
        Threads(rt.redis).join(lines, received, ttl)


def _cid(record: Delivery) -> str:
    return conversation_id((record.thread or {})["key"], record.channel, record.recipient or record.address)


def in_order(rt: Context, record: Delivery, now: float) -> Conversation | Waits | None:
    """None for an unthreaded delivery; else its conversation as it is now, or how long it waits its turn."""
    route = threaded_route(rt, record) if record.thread else None
    if route is None:
        return None
    return Threads(rt.redis).turn(
        _cid(record), record.id, record.createdAt, now, now + RECHECK, now + SOON, route.thread_for
    )


def aim(
    rt: Context, record: Delivery, url: str, talk: Conversation | None
) -> tuple[str, Callable[[str], dict[str, str]] | None, bool]:
    """The URL (a Slack reply's), the e-mail's headers given its sender, and whether Slack shows a reply in the
    channel too. Every e-mail gets a Message-ID, threaded or not."""
    kind = threads_on(url)
    if kind == "email":
        return url, lambda sender: mail_headers(record.id, sender, talk or Conversation()), False
    if talk is None or talk.slack is None or talk.root == record.id or kind != "slack":
        return url, None, False
    route = threaded_route(rt, record)
    return slack_reply_url(url, talk.slack), None, bool(route and route.thread_broadcast)


def sent(rt: Context, record: Delivery, talk: Conversation | None, outcome: Outcome, url: str) -> None:
    """A threaded message went out: the conversation notes it (before its state is stored), its record says how."""
    if talk is None or not isinstance(outcome, Delivered) or record.thread is None:
        return
    route = threaded_route(rt, record)
    if route is None:
        return
    email = threads_on(url) == "email"
    if not email and outcome.posted is None:
        return  # Slack's answer named no message: nothing to reply to, so it starts no conversation either
    Threads(rt.redis).sent(_cid(record), record.id, outcome.posted, email, route.thread_for)
    record.thread = talk.shown(record.thread["key"], record.id)


def moved_on(rt: Context, record: Delivery) -> None:
    """After a try: one that no longer holds its line back (ended, or held) lets the next waiting one go."""
    if record.thread and record.state not in LIVE and threaded_route(rt, record) is not None:
        ended = record.state is not State.HELD
        if Threads(rt.redis).leave(_cid(record), record.id, ended, rt.clock()):
            rt.work.request_wake()
