"""Conversations (docs/delivery.md, "Conversations"): which channels thread, a conversation's identity, and what a
reply carries on each (Slack's `thread_ts` target, e-mail's Message-ID, In-Reply-To and References). Pure."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from jinja2 import Environment, Template

from relay.core.model import Delivery, Notification
from relay.core.redaction import EMAIL_SCHEMES
from relay.core.rendering import build_context, render_template

MAX_KEY = 200  # characters of a key kept: two keys alike in their first 200 are one conversation
MAX_REFERENCES = 20
_BOT = re.compile(r"^slack://([^/?]*@)?xox[bp]-", re.I)  # a bot or user token: Slack's Web API, which threads
HOOK = "an incoming-webhook Slack URL cannot reply in a thread: sent unthreaded (a bot token, slack://xoxb-..., can)"
TARGETS = "a Slack URL naming several channels (or `to=`) cannot be one conversation: sent unthreaded"
MARKDOWN = "an e-mail channel with `format: md` is sent by Apprise, without relay's Message-ID: sent unthreaded"


def threads_on(url: str, fmt: str | None = None) -> str | None:
    """`slack` or `email` for a channel that threads, else None (`fmt`: the channel's `format`)."""
    scheme = url.split("://", 1)[0].lower()
    if scheme in EMAIL_SCHEMES:
        return "email" if fmt != "md" else None
    path, _, query = url.split("://", 1)[-1].partition("?")
    one = len([t for t in path.split("/")[1:] if t]) == 1 and "to=" not in query.lower()
    return "slack" if _BOT.match(url) and one else None


def unthreaded_why(url: str) -> str:
    """Why a channel that `threads_on` turns down sends unthreaded."""
    scheme = url.split("://", 1)[0].lower()
    if scheme == "slack":
        return TARGETS if _BOT.match(url) else HOOK
    return MARKDOWN if scheme in EMAIL_SCHEMES else f"a {scheme or '?'} channel has no threads: sent unthreaded"


def conversation_id(key: str, channel: str, person: str | None) -> str:
    """One key on one channel (on a per-recipient channel, one person: their reference, else their address)."""
    raw = f"{key}\x00{channel}\x00{(person or '').lower()}"
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Conversation:
    """As it is when a message goes: its first message's delivery id, Slack's `channel:ts` of it, and the
    delivery ids of its e-mails (the first, then the latest, at most MAX_REFERENCES)."""

    root: str | None = None
    slack: str | None = None
    mails: list[str] = field(default_factory=list)

    def shown(self, key: str, ident: str) -> dict[str, object]:
        """The record's `thread` once this delivery (`ident`) goes in it."""
        return {"key": key[:MAX_KEY], "root": self.root or ident, "reply": self.root not in (None, ident)}


def message_id(delivery_id: str, sender: str) -> str:
    """Made from the delivery's id: every try of one delivery is one message to a mail client."""
    domain = sender.rpartition("@")[2] or "relay.invalid"
    return f"<{delivery_id}@{domain}>"


def mail_headers(ident: str, sender: str, conversation: Conversation) -> dict[str, str]:
    """Message-ID, and on a reply In-Reply-To (the first) and References (the first, then the latest)."""
    headers = {"Message-ID": message_id(ident, sender)}
    earlier = [m for m in conversation.mails if m != ident]
    if conversation.root not in (None, ident) and earlier:
        refs = [earlier[0], *earlier[1:][1 - MAX_REFERENCES :]]
        headers["In-Reply-To"] = message_id(earlier[0], sender)
        headers["References"] = " ".join(message_id(m, sender) for m in refs)
    return headers


def slack_reply_url(url: str, posted: str) -> str:
    """The channel's URL aimed at the first message's thread: Apprise's target `+<channel id>:<ts>`."""
    base, _, query = url.split("://", 1)[1].partition("?")
    return f"slack://{base.split('/', 1)[0]}/+{posted}" + (f"?{query}" if query else "")


@lru_cache(maxsize=256)
def _compiled(env: Environment, source: str) -> Template:
    return env.from_string(source)


def render_key(env: Environment, source: str, notification: Notification, record: Delivery, extra: Any) -> str:
    """The key, rendered in the templates' sandbox with their context and limits, its spaces squeezed."""
    context = build_context(notification, record, extra)
    return " ".join(render_template(_compiled(env, source), context, "txt")[1].split())
