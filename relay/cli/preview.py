"""`relay preview`: the delivery plan and every rendered message of a payload, without sending."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any
from urllib.parse import parse_qsl

from relay.cli.checks import shown_target
from relay.config import Config
from relay.core.clock import Clock, system_clock
from relay.core.model import Delivery, Notification, State
from relay.core.names import Lookup
from relay.core.quiet import held_until, route_named
from relay.core.recipients import reference_of
from relay.core.rendering import Renderer, recipient_of, template_globals
from relay.core.routing import matcher_view, plan_notification
from relay.core.times import instant
from relay.delivery.catalog import Catalog
from relay.delivery.channels import channel_format, redact
from relay.digests.model import digest_of, human_duration
from relay.preferences.model import Preference, active_until, claim_of, claim_of_delivery, opted_out_why
from relay.preferences.sending import link_tokens, links, with_unsubscribe_headers
from relay.silences.model import Silence, delivery_view, silenced
from relay.storage.store import iso
from relay.threads.model import MAX_KEY, Conversation, conversation_id, render_key, threads_on, unthreaded_why


def preview_plan(
    config: Config,
    data: dict[str, Any],
    now: datetime | None = None,
    preferences: Mapping[str, Preference] | None = None,
    silences: Sequence[Silence] = (),
    lookup: Lookup | None = None,
    clock: Clock = system_clock,
    conversations: Callable[[str], Conversation | None] | None = None,
) -> list[dict[str, Any]]:
    """`now`: when the notification would arrive (default: now on `clock`); `preferences`, `silences` and `lookup`
    say what would be skipped or held, and the names, as sending asks them; `conversations`, which are open."""
    notification = Notification.model_validate(data)
    at = now or datetime.fromtimestamp(clock(), UTC)
    known = preferences or {}
    arriving = _LinkContext(config, at.timestamp)
    extra = template_globals(config)
    renderer = Renderer(config.templates_path, extra, config.templates.builtin)
    out = []
    for planned in plan_notification(config, notification, notification.event_id, at.timestamp()):
        channel = config.channels[planned.channel]
        fmt = channel_format(channel.url, channel.format)
        item: dict[str, Any] = {
            "message": planned.messageIndex,
            "recipientType": planned.recipientType,
            "channel": planned.channel,
            "route": planned.route,
            "target": shown_target(channel.url, fmt),
            "recipient": _reference(notification, planned),
            "address": planned.address,
        }
        if planned.lookup:
            item["lookup"] = f"the address of {planned.recipient} is looked up in the platform catalog when sent"
        people = [known[p] for p in claim_of_delivery(config, notification, planned).people() if p in known]
        opted = opted_out_why(config, people, planned.kind, planned.channel)
        if opted is not None and planned.state is not State.SKIPPED:
            planned.state, planned.lastError = State.SKIPPED, f"{opted} (the person's preferences)"
        hush = silenced(silences, delivery_view(matcher_view(notification), planned), at.timestamp())
        if hush is not None and hush.skip and planned.state is not State.SKIPPED:
            planned.state, planned.lastError = State.SKIPPED, hush.reason
        if planned.state is State.SKIPPED:
            item.update(state=State.SKIPPED, reason=planned.lastError)
        else:
            # The person's links, as sending makes them: a template's branch on them, the e-mail's footer and
            # its List-Unsubscribe header show as they will go (their tokens shown as ****: `link_tokens`).
            person = links(arriving, notification, planned)
            rendered = renderer.render(notification, planned, fmt, person, lookup)
            tokens = link_tokens(person)
            item.update(
                state="would send",
                template=rendered.template,
                format=rendered.format,
                title=redact(rendered.title, tokens),
                body=redact(rendered.body, tokens),
            )
            if rendered.text is not None:
                item["text"] = redact(rendered.text, tokens)
            headers = _headers(with_unsubscribe_headers(channel.url, person))
            if headers:
                item["headers"] = {k: redact(v, tokens) for k, v in headers.items()}
            if rendered.error:
                item["templateError"] = rendered.error
            until = held_until(config, planned.route, at)
            mine = active_until(
                config, people, planned.kind, at.timestamp(), partial(held_until, config, planned.route)
            )
            if mine is not None:
                item.update(state=State.HELD, notBefore=iso(mine), heldBy="the person's active hours")
            elif until is not None:
                item.update(state=State.HELD, notBefore=iso(until.timestamp()))
            elif _has_intervals(config, planned.route):
                item["quietHours"] = "inside the route's time intervals: goes out now"
            if hush is not None and hush.until > instant(item.get("notBefore", iso(0))):  # the later hold says when
                item.update(state=State.HELD, notBefore=iso(hush.until), heldBy=hush.reason)
            thread = _thread(config, renderer, notification, planned, conversations)
            if thread is not None:
                item["thread"] = thread
            digest = digest_of(config, planned.route)
            if digest is not None:
                item["digest"] = {"window": human_duration(digest.window), "maxItems": digest.max_items}
        out.append(item)
    return out


def preview(plan: list[dict[str, Any]], fmt: str = "text") -> str:
    """A `preview_plan` as `relay preview` prints it: JSON, or text a block a delivery."""
    if fmt == "json":
        return json.dumps({"deliveries": plan}, indent=2, ensure_ascii=False)
    if not plan:
        return "no deliveries: no route and no default channel matches this notification"
    blocks = []
    for n, item in enumerate(plan, 1):
        head = f"[{n}] message {item['message']} ({item['recipientType']}) -> {item['channel']} {item['target']}"
        lines = [head, f"    to: {_who(item)}", f"    route: {item['route']}"]
        if item["state"] == State.SKIPPED:
            blocks.append("\n".join([*lines, f"    skipped: {item['reason']}"]))
            continue
        if item["state"] == State.HELD:
            by = item.get("heldBy", "the route's time intervals")
            lines.append(f"    held until {item['notBefore']} ({by})")
        elif "quietHours" in item:
            lines.append(f"    {item['quietHours']}")
        if "digest" in item:
            window, most = item["digest"]["window"], item["digest"]["maxItems"]
            gathered_by = "address" if item["address"] or "lookup" in item else "channel"
            lines.append(
                f"    joins a digest: gathered with the route's other deliveries to this {gathered_by} for"
                f" {window} from the first (at most {most} a message), then sent as one"
            )
        if "thread" in item:
            lines.append(f"    thread: {item['thread']}")
        lines.append(f"    template: {item['template']} ({item['format']})")
        if "templateError" in item:
            lines.append(f"    template failed, the platform's text is used: {item['templateError']}")
        for name, value in item.get("headers", {}).items():
            lines.append(f"    header {name}: {value}")
        lines.append(f"    title: {item['title']}")
        lines.append("    " + item["body"].replace("\n", "\n    "))
        if "text" in item:
            lines.append("    --- plain-text part")
            lines.append("    " + item["text"].replace("\n", "\n    "))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _thread(
    config: Config,
    renderer: Renderer,
    notification: Notification,
    planned: Delivery,
    conversations: Callable[[str], Conversation | None] | None,
) -> str | None:
    """Whether it starts a conversation or replies in one (and to which delivery), or why it goes unthreaded."""
    route, channel = route_named(config, planned.route), config.channels[planned.channel]
    if route is None or not route.thread:
        return None
    if route.digest is not None or threads_on(channel.url, channel.format) is None:
        why = unthreaded_why(channel.url)
        return "unthreaded: " + ("a digest is one message of its own" if route.digest else why)
    try:
        key = render_key(renderer.env, route.thread, notification, planned, renderer.extra)[:MAX_KEY]
    except Exception as exc:
        return f"unthreaded: its key failed to render: {type(exc).__name__}: {exc}"
    if not key:
        return "unthreaded: its key is empty"
    cid = conversation_id(key, planned.channel, planned.recipient or planned.address)
    found = conversations(cid) if conversations is not None else None
    if found is None:
        return f"starts a conversation (key {key!r})"
    return f"replies in the conversation of key {key!r} (its first message: delivery {found.root})"


@dataclass
class _LinkContext:
    """For a preview: no catalog (no address from it yet), and the time the notification would arrive."""

    config: Config
    clock: Callable[[], float]
    catalog: Catalog | None = None
    redis: None = None  # a preview binds no address (relay.preferences.sending.link_person)


def _headers(sent: str) -> dict[str, str]:
    """The List-Unsubscribe headers sending adds to an e-mail channel's URL (Apprise's `+Name=value`)."""
    pairs = parse_qsl(sent.partition("?")[2], keep_blank_values=True)
    return {k[1:]: v for k, v in pairs if k.lower().startswith("+list-unsubscribe")}


def people_of(data: dict[str, Any]) -> list[str]:
    """The people a payload addresses one by one (whose preferences a preview reads)."""
    notification = Notification.model_validate(data)
    return sorted({p for m in notification.messages for r in m.recipients for p in claim_of(r).people()})


def _reference(notification: Notification, delivery: Delivery) -> str | None:
    """The recipient's reference, None when it has none (a delivery records its address then)."""
    recipient = recipient_of(notification, delivery)
    return reference_of(recipient) if recipient is not None and delivery.address else delivery.recipient


def _has_intervals(config: Config, label: str | None) -> bool:
    route = route_named(config, label)
    return route is not None and bool(route.active_time_intervals or route.mute_time_intervals)


def _who(item: dict[str, Any]) -> str:
    """The address it mails, the look-up it will make, or the channel itself (a Slack channel, a webhook)."""
    ref, address = item["recipient"], item["address"]
    if address:
        return f"{address} ({ref})" if ref and ref != address else address
    if "lookup" in item:
        return f"{ref}, whose address is looked up in the platform catalog when sent"
    if ref:
        return f"{ref}: no address"
    return "the channel itself"
