"""Signed links to a person's preference page and one-click unsubscribe (relay.people), stateless.

A link carries its person, the address its message went to, its scope (`prefs`, or `unsub`: one kind on one
channel) and when it was made, signed (HMAC-SHA256, `preferences.secret`). A link sent to an address names that
address's person (its `userRef` only when relay tied them: relay.preferences.sending.links). A tampered link,
or one of another secret or scope, is refused (403); one older than `preferences.link_ttl` as configured now, 410.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

from relay.config import PreferencesConfig
from relay.preferences.model import literal_opt_out, person_key

PREFERENCES_PATH = "/preferences/"
UNSUBSCRIBE_PATH = "/unsubscribe/"
SCOPE_PREFERENCES = "prefs"
SCOPE_UNSUBSCRIBE = "unsub"
_VERSION = "v2"
_SEP = "\n"
MAX_TOKEN = 2048
CLOCK_SKEW = 300.0  # seconds: a link "made" further ahead than this was not made by this relay's clock


class LinkRefused(Exception):
    """A link that is not honoured: 403 (not valid here) or 410 (expired). The message is safe to show."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass(frozen=True)
class Link:
    person: str
    scope: str
    issued: float
    kind: str = ""  # unsubscribe links: the kind and channel they opt out of
    channel: str = ""
    address: str = ""  # where the message with this link went ("" for a support desk's link)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    """base64's last character carries bits decoding ignores: a text not encoding back to itself is refused."""
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:
        raise ValueError("not the canonical spelling")
    return data


def _mac(secret: str, payload: bytes) -> bytes:
    return hmac.new(secret.encode(), b"relay-link:" + payload, hashlib.sha256).digest()


def make_token(secret: str, link: Link) -> str:
    fields = [_VERSION, link.scope, link.person, link.address, str(int(link.issued)), link.kind, link.channel]
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
    if len(fields) != 7 or fields[0] != _VERSION:
        raise invalid
    if not fields[4].isdigit():
        raise invalid
    link = Link(fields[2], fields[1], float(fields[4]), fields[5], fields[6], fields[3])
    if link.scope != scope or person_key(link.person) != link.person or link.issued > now + CLOCK_SKEW:
        raise invalid
    if link.scope == SCOPE_UNSUBSCRIBE and not literal_opt_out(link.kind, link.channel):
        raise invalid  # one click changes its own kind on its own channel, never a pattern of kinds
    if now - link.issued > ttl:
        raise LinkRefused(410, "This link has expired. The link in your latest notification works.")
    return link


def _base(config: PreferencesConfig) -> str | None:
    if not config.links or config.secret is None or config.public_url is None:
        return None
    return config.public_url.rstrip("/")


def preferences_url(config: PreferencesConfig, person: str, now: float, address: str = "") -> str | None:
    """The person's preference page, signed (None without a public URL); `address`: where its message goes."""
    base = _base(config)
    if base is None or config.secret is None:
        return None
    return base + PREFERENCES_PATH + make_token(config.secret, Link(person, SCOPE_PREFERENCES, now, address=address))


def unsubscribe_url(
    config: PreferencesConfig, person: str, kind: str, channel: str, now: float, address: str = ""
) -> str | None:
    """One-click unsubscribe from this kind on this channel, signed (None without a public URL, or for a pattern)."""
    base = _base(config)
    if base is None or config.secret is None or not literal_opt_out(kind, channel):
        return None
    link = Link(person, SCOPE_UNSUBSCRIBE, now, kind, channel, address)
    return base + UNSUBSCRIBE_PATH + make_token(config.secret, link)
