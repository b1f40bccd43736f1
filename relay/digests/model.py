"""Digests: which deliveries a route gathers, for how long, and the one message that carries them. Pure: the
config, the items and the time in; the storing and sending is `relay.digests.sending`."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass
from typing import Any

from relay.config import Config, DigestConfig
from relay.config.matchers import node_at
from relay.core.quiet import route_named
from relay.core.rendering import Rendered, Renderer, render_template, text_counterpart

log = logging.getLogger(__name__)
DIGEST_TEMPLATE = "_digest"  # the `template` a digest's record names until it is rendered
# A delivery that was held by quiet hours (or released) joins a digest that closes this soon at most: the
# deliveries held overnight all wake when the interval opens, and go out together then (the morning
# summary), not a whole window later.
CATCH_UP_SECONDS = 10.0
# Deliveries released by an operator go out now: those released together (a batch of `relay release`) are
# gathered this long, then sent as one.
RELEASED_SECONDS = 2.0


@dataclass(frozen=True)
class DigestItem:
    """One delivery a digest carries, as digest templates see it (`items`)."""

    kind: str
    eventId: str
    receivedAt: str  # ISO 8601, UTC
    title: str
    text: str
    recipient_type: str | None


def digest_of(config: Config, route_label: str | None) -> DigestConfig | None:
    """The digest settings of the route that planned a delivery (None: it is sent on its own)."""
    route = route_named(config, route_label)
    return route.digest if route is not None else None


def gather_key(
    route_label: str, channel: str, address: str | None, released: bool = False, group: str | None = None
) -> str:
    """Released deliveries gather apart, in a digest nothing holds, never in one quiet hours or a long window
    would keep. `group`: the value of the digest's `key` (`group_of`): one digest per value."""
    raw = f"{route_label}\x00{channel}\x00{(address or '').lower()}" + ("\x00released" if released else "")
    if group is not None:
        raw += "\x00group\x00" + group
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def group_of(notification: dict[str, Any], dotted: str) -> str:
    """As text (an object or a list as its JSON); absent or null reads as one group of its own (the empty string)."""
    node = node_at(notification, dotted.split("."))
    if node is None:
        return ""
    return node if isinstance(node, str) else json.dumps(node, sort_keys=True, separators=(",", ":"))


def digest_id(key: str, first_item: str) -> str:
    """A digest's delivery id: stable for its first item, so a retried gathering names the same digest."""
    return "g" + hashlib.sha256(f"{key}\x00{first_item}".encode()).hexdigest()[:24]


def window_for(digest: DigestConfig, was_held: bool, released: bool = False) -> float:
    if released:
        return min(digest.window, RELEASED_SECONDS)
    return min(digest.window, CATCH_UP_SECONDS) if was_held else digest.window


def human_duration(seconds: float) -> str:
    """15m, 1h30m, 90s, 2.5s: how a window reads in a template."""
    if seconds != int(seconds):
        return f"{seconds:g}s"
    rest, out = int(seconds), ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            out += f"{rest // size}{unit}"
            rest %= size
    return out or "0s"


def render_digest(
    renderer: Renderer,
    items: list[DigestItem],
    channel: str,
    recipient: str | None,
    window: float,
    fmt: str,
    extra: dict[str, Any] | None = None,
) -> Rendered:
    """An operator's template that fails falls back to relay's own, and says why (`Rendered.error`)."""
    context: dict[str, Any] = {
        "items": [asdict(i) for i in items],
        "channel": channel,
        "channel_label": channel,  # what recipients are shown for it: its `label:` (the caller's `extra`)
        "recipient": recipient,
        "window": human_duration(window),
        **(extra or {}),  # the person's `preferences_url`, for a digest to one person
    }
    default_title = f"{len(items)} notifications"
    error: str | None = None
    own = f"{DIGEST_TEMPLATE}/default.{fmt}.j2"
    # The operator's most specific digest template (the channel's, else their default), then relay's own.
    name = next((n for n in (f"{DIGEST_TEMPLATE}/{channel}.{fmt}.j2", own) if renderer.operator_has(n)), None)
    if name is not None:
        try:
            return _render(renderer, name, context, fmt, default_title, operator=True)
        except Exception as exc:  # any template failure: relay's own digest, never a lost message
            error = f"{name}: {type(exc).__name__}: {exc}"
    try:
        rendered = _render(renderer, own, context, fmt, default_title, operator=False)
    except Exception as exc:  # relay's own failed (it should not): the items as plain text
        log.error("relay's own digest template failed: %s", exc)
        body = "\n\n".join(f"{i.title}\n{i.text}".strip() for i in items)
        return Rendered(default_title, body, "txt", "platform", error or f"{own}: {exc}")
    return Rendered(rendered.title, rendered.body, rendered.format, rendered.template, error, rendered.text)


def _render(
    renderer: Renderer, name: str, context: dict[str, Any], fmt: str, default_title: str, operator: bool
) -> Rendered:
    # Operator's: through the loader (theirs come first); relay's own: from the shipped directory only.
    env = renderer.env if operator else renderer.builtin_env
    tpl = env.get_template(name)
    title, body = render_template(tpl, context, fmt, default_title)
    shown = title if title is not None else default_title
    text: str | None = None
    text_name = text_counterpart(name)
    # An operator's HTML digest takes the operator's own text sibling, if any (else it is derived from the HTML).
    if text_name is not None and (not operator or renderer.operator_has(text_name)):
        try:
            text = render_template(env.get_template(text_name), context, "txt", shown)[1]
        except Exception as exc:  # the HTML part is fine; the text part is derived from it instead
            log.warning("digest text part template failed, derived from the HTML instead: %s: %s", text_name, exc)
    return Rendered(shown, body, fmt, name if operator else f"relay:{name}", text=text)
