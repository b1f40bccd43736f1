"""Signed links to a person's preference page and one-click unsubscribe (relay.people).

A link carries the person, its scope (`prefs`: the preference page; `unsub`: one kind on one channel) and
when it was made, signed with HMAC-SHA256 under `preferences.secret`. A link that is tampered with, signed
by another secret or made for another scope is refused (403); one older than `preferences.link_ttl` (as
configured now, so shortening the TTL retires old links at once) is refused with 410. No state on the
server: nothing to store, nothing to clean.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

from relay.config import PreferencesConfig

PREFERENCES_PATH = "/preferences/"
UNSUBSCRIBE_PATH = "/unsubscribe/"
SCOPE_PREFERENCES = "prefs"
SCOPE_UNSUBSCRIBE = "unsub"
_VERSION = "v1"
_SEP = "\n"
MAX_TOKEN = 2048
CLOCK_SKEW = 300.0  # seconds: a link "made" further ahead than this was not made by this relay's clock


class LinkRefused(Exception):
    """A link that is not honoured: 403 (not valid here) or 410 (expired). The message is safe to show."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Link:
    person: str
    scope: str
    issued: float
    kind: str = ""  # unsubscribe links: the kind and channel they opt out of
    channel: str = ""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: str, payload: bytes) -> bytes:
    return hmac.new(secret.encode(), b"relay-link:" + payload, hashlib.sha256).digest()


def make_token(secret: str, link: Link) -> str:
    fields = [_VERSION, link.scope, link.person, str(int(link.issued)), link.kind, link.channel]
    payload = _SEP.join(fields).encode()
    return f"{_b64(payload)}.{_b64(_mac(secret, payload))}"


def read_token(secret: str, token: str, scope: str, now: float, ttl: float) -> Link:
    """The link a token carries, if it is this relay's, of this scope and not expired; else LinkRefused."""
    invalid = LinkRefused(403, "This link is not valid. Use the latest link from one of your notifications.")
    body, dot, mac = token.partition(".")
    if not dot or len(token) > MAX_TOKEN:
        raise invalid
    try:
        payload, given = _unb64(body), _unb64(mac)
    except (binascii.Error, ValueError):
        raise invalid from None
    if not hmac.compare_digest(given, _mac(secret, payload)):
        raise invalid
    try:
        fields = payload.decode().split(_SEP)
    except UnicodeDecodeError:
        raise invalid from None
    if len(fields) != 6 or fields[0] != _VERSION or not fields[3].isdigit():
        raise invalid
    link = Link(person=fields[2], scope=fields[1], issued=float(fields[3]), kind=fields[4], channel=fields[5])
    if link.scope != scope or not link.person or link.issued > now + CLOCK_SKEW:
        raise invalid
    if now - link.issued > ttl:
        raise LinkRefused(410, "This link has expired. The link in your latest notification works.")
    return link


def _base(config: PreferencesConfig) -> str | None:
    if not config.links or config.secret is None or config.public_url is None:
        return None
    return config.public_url.rstrip("/")


def preferences_url(config: PreferencesConfig, person: str, now: float) -> str | None:
    """The person's preference page, signed (None without `preferences.public_url`)."""
    base = _base(config)
    if base is None or config.secret is None:
        return None
    return base + PREFERENCES_PATH + make_token(config.secret, Link(person, SCOPE_PREFERENCES, now))


def unsubscribe_url(config: PreferencesConfig, person: str, kind: str, channel: str, now: float) -> str | None:
    """One-click unsubscribe of this person from this kind on this channel, signed (None without a public URL)."""
    base = _base(config)
    if base is None or config.secret is None:
        return None
    link = Link(person, SCOPE_UNSUBSCRIBE, now, kind, channel)
    return base + UNSUBSCRIBE_PATH + make_token(config.secret, link)
