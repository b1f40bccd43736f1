"""What people read instead of relay's internals: display names, a channel's label, the link to the resource a
notification is about. Pure: the catalog's answers (relay.delivery.names) come in as data."""

from __future__ import annotations

import re
import unicodedata
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from jinja2 import pass_context
from jinja2.runtime import Context

from relay.config import Config
from relay.core.lookup import split_ref
from relay.core.model import Notification
from relay.core.recipients import email_of, user_field

MAX_NAME = 120  # characters of a display name shown
MAX_REFS = 200  # references named per notification
MAX_NODES = 5000  # values of a body walked to find them
MAX_LINK = 2000  # characters of a relativeLink
# Where a recipient object carries a name the platform resolved (`notifications.webhooks.userEntityFields`).
RECIPIENT_NAME_FIELDS = ("spec.profile.displayName", "displayName", "metadata.title", "title")
# Characters of a link that stay as they are; anything else (spaces, quotes, `<`, `\`) is percent-encoded.
_LINK_SAFE = "/?#[]@!$&'()*+,;=:-._~%"

Lookup = Callable[[Sequence[str]], Mapping[str, str]]


# Bidirectional controls (U+202A to U+202E, U+2066 to U+2069, the marks): an override makes a name read as
# another (`Alice\u202egnp.exe`), in a page or an e-mail alike.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _shown(c: str) -> bool:
    return (unicodedata.category(c) != "Cc" or c.isspace()) and c not in _BIDI


def clean_name(value: Any) -> str | None:
    """A display name as shown: one line, no (bidirectional) control characters, at most MAX_NAME; None if empty."""
    if not isinstance(value, str):
        return None
    text = " ".join("".join(c for c in value if _shown(c)).split())
    if not text:
        return None
    return text if len(text) <= MAX_NAME else text[: MAX_NAME - 1] + "…"


def readable_ref(ref: str) -> str:
    """A reference as a person reads it: `user:default/alice.rossi` is `alice.rossi`, a group's `team (group)`."""
    parts = split_ref(ref) if isinstance(ref, str) else None
    if parts is None:
        return clean_name(ref) or str(ref)
    kind, _, name = parts
    shown = clean_name(name) or name
    return shown if kind == "user" else f"{shown} ({kind})"


def entity_display_name(entity: Mapping[str, Any]) -> str | None:
    """A catalog entity's name for people: `spec.profile.displayName`, else `metadata.title`."""
    found = (clean_name(user_field(dict(entity), f)) for f in ("spec.profile.displayName", "metadata.title"))
    return next((name for name in found if name), None)


# `kind:name` or `kind:namespace/name`: not a URL (`https://x`) nor a URN (`urn:a:b`), which have more colons.
_REF = re.compile(r"[A-Za-z][A-Za-z0-9_-]*:(?:[^\s/:]+/)?[^\s/:]+")


def _is_ref(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= 300 and _REF.fullmatch(value) is not None


def _nodes(value: Any) -> Iterator[tuple[str, Any]]:
    """(key, value) of every value inside `value`, shallowest first, at most MAX_NODES."""
    queue: deque[tuple[str, Any]] = deque([("", value)])
    seen = 0
    while queue and seen < MAX_NODES:
        key, node = queue.popleft()
        seen += 1
        yield key, node
        if isinstance(node, Mapping):
            queue.extend((str(k), v) for k, v in node.items())
        elif isinstance(node, list):
            queue.extend((key, v) for v in node)


def _lists_people(key: str) -> bool:
    """A key whose value is references (`userRef`, `requestedUsers`, `memberRefs`)."""
    return key == "userRef" or key.endswith(("Users", "users", "Refs"))


def refs_of(notification: Notification) -> list[str]:
    """The references a notification names people or groups by: `userRef`s, and lists like `requestedUsers`."""
    found: dict[str, None] = {}
    for message in notification.messages:
        for recipient in message.recipients:
            if isinstance(recipient, Mapping) and _is_ref(recipient.get("userRef")):
                found.setdefault(recipient["userRef"])
    for key, node in _nodes(notification.body):
        if _lists_people(key) and _is_ref(node):
            found.setdefault(node)
    return list(found)[:MAX_REFS]


def payload_names(notification: Notification) -> dict[str, str]:
    """Recipients' resolved names (by `userRef` and lower-cased e-mail), and body objects' `displayName`s."""
    names: dict[str, str] = {}
    for message in notification.messages:
        for recipient in message.recipients:
            if not isinstance(recipient, Mapping):
                continue
            name = next((n for f in RECIPIENT_NAME_FIELDS if (n := clean_name(user_field(recipient, f)))), None)
            if name is None:
                continue
            if _is_ref(recipient.get("userRef")):
                names.setdefault(recipient["userRef"], name)
            email = email_of(recipient)
            if email:
                names.setdefault(email.lower(), name)
    for _, node in _nodes(notification.body):
        if isinstance(node, Mapping) and _is_ref(node.get("userRef")):
            name = clean_name(node.get("displayName"))
            if name:
                names.setdefault(node["userRef"], name)
        if len(names) >= MAX_REFS:
            break
    return names


def names_of(notification: Notification, lookup: Lookup | None = None) -> dict[str, str]:
    """Each reference's name to show: the payload's, else the catalog's (`lookup`), else its readable form."""
    given = payload_names(notification)
    refs = refs_of(notification)
    missing = [r for r in refs if r not in given]
    found = lookup(missing) if lookup is not None and missing else {}
    names = {r: readable_ref(r) for r in refs}
    for ref, name in found.items():
        shown = clean_name(name)
        if ref in names and shown:
            names[ref] = shown
    names.update(given)
    return names


@pass_context
def display_name(context: Context, value: Any) -> str:
    """The `display_name` filter: the name `names` has for a reference (or an object's own `displayName`)."""
    if isinstance(value, Mapping):
        own = clean_name(value.get("displayName"))
        if own:
            return own
        value = value.get("userRef")
    if value is None:
        return ""
    if not isinstance(value, str):
        return str(value)
    names = context.get("names")
    if isinstance(names, Mapping):
        found = names.get(value) or names.get(value.lower())
        if isinstance(found, str) and found:
            return found
    return readable_ref(value)


def readable(name: str) -> str:
    """A name as a label: `people-email` is `People email`."""
    words = " ".join(name.replace("-", " ").replace("_", " ").split())
    return words[:1].upper() + words[1:] if words else name


def channel_label(config: Config, name: str) -> str:
    """What recipients are shown for a channel: its `label:`, else its readable name."""
    if name == "*":
        return "every channel"
    channel = config.channels.get(name)
    return channel.label if channel is not None and channel.label else readable(name)


def relative_link(body: Any) -> str | None:
    """The body's `relativeLink` nearest its top (`requestedResource.parentSystem.relativeLink`)."""
    for key, node in _nodes(body):
        if key == "relativeLink" and isinstance(node, str) and node:
            return node
    return None


def join_link(base: str | None, link: str | None) -> str | None:
    """None unless relative: nothing from the payload may change the scheme or the host (`/\\x`, `..`, ...)."""
    if not base or not link or len(link) > MAX_LINK:
        return None
    if any(unicodedata.category(c) == "Cc" for c in link) or link.replace("\\", "/").startswith("//"):
        return None
    try:
        root, parts = urlsplit(base), urlsplit(link)
    except ValueError:
        return None
    if root.scheme not in ("http", "https") or not root.hostname or parts.scheme or parts.netloc:
        return None
    if any(unquote(s) in (".", "..") for s in parts.path.replace("\\", "/").split("/")):
        return None  # a browser would climb out of the base's path (`/..//evil.example`)
    joined = base.rstrip("/") + quote(link if link.startswith("/") else "/" + link, safe=_LINK_SAFE)
    try:
        out = urlsplit(joined)
    except ValueError:
        return None
    return joined if (out.scheme, out.netloc) == (root.scheme, root.netloc) else None


def resource_url(base: str | None, body: Any) -> str | None:
    """The resource's page in the platform's UI, when both the base and the body's link are known."""
    return join_link(base, relative_link(body)) if base else None
