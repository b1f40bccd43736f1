"""Secrets out of every text relay shows: logs, error texts, API answers, command output. A credential reaches
a text in many spellings (decoded, re-encoded, JSON-escaped), so each is expanded into all of them."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit

if TYPE_CHECKING:
    from relay.config import Config

MASK = "****"
# Shorter pieces are not scrubbed: they would eat ordinary words and numbers.
MIN_LENGTH = 4
EMAIL_SCHEMES = frozenset({"mailto", "mailtos"})
# Query keys whose values are addresses or settings, not credentials; they stay readable.
PLAIN_KEYS = frozenset({"from", "to", "mode", "format", "method", "cc", "bcc", "name"})
# Words that introduce a credential in a header value ("Bearer <token>"); the word itself is no secret.
AUTH_WORDS = frozenset({"bearer", "basic", "token", "digest", "apikey"})
_PLAIN_WORD = re.compile(r"[a-z]+(?:[._-][a-z]+)*")
# In a web-hook URL a path segment that is a short plain word (`/owners`, `/hooks`) names a route, not a
# credential: hiding it would blank that word wherever it appears, in channel names and kinds too. Chat
# URLs (slack://, workflows://, discord://) carry tokens in their path, so there every segment counts.
PLAIN_SEGMENT_MAX = 16
ROUTE_SCHEMES = frozenset({"json", "jsons", "form", "forms", "xml", "xmls", "http", "https"})
# The `safe` sets of the encoders that put values into URLs: quote(), urlencode(safe="@"), Apprise.
_SAFE_SETS = ("", "/", "@", "@:", "/:@")


def _encoded(value: str) -> set[str]:
    out = {quote(value, safe=safe) for safe in _SAFE_SETS}
    out |= {quote_plus(value), quote_plus(value, safe="@")}
    out |= {json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    return out


def forms(value: str) -> set[str]:
    """`value` as written, decoded, and re-encoded as a URL or JSON may show it; a decoded value's words too."""
    decoded = {value, unquote(value), unquote_plus(value)}
    words = {w for d in decoded for w in d.split() if w.lower() not in AUTH_WORDS and w != d}
    found = decoded | words
    for piece in decoded | words:
        found |= _encoded(piece)
    return {f for f in found if len(f) >= MIN_LENGTH}


def _userinfo(netloc: str) -> list[str]:
    if "@" not in netloc:
        return []
    userinfo = netloc.rsplit("@", 1)[0]
    user, _, password = userinfo.partition(":")
    pieces = [userinfo, password]
    # A login that is a plain word (relay, mailer, apikey) is no secret, and hiding it would blank that
    # word in every log line; one like an address or an identifier (ops@corp, AKIA1234) is hidden.
    if not _PLAIN_WORD.fullmatch(unquote(user)):
        pieces.append(user)
    # HTTP Basic sends exactly this pair base64-encoded.
    pieces.append(base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode())
    return pieces


def _host_token(scheme: str, netloc: str) -> list[str]:
    """Chat URLs put tokens in the host position (slack://T/B/C, msteams://team/...): a non-hostname counts."""
    if scheme in EMAIL_SCHEMES or not netloc or "@" in netloc:
        return []
    host = netloc.split(":")[0]
    return [] if "." in host or host.lower() == "localhost" else [host]


def _plain_segment(scheme: str, segment: str) -> bool:
    if scheme not in ROUTE_SCHEMES:
        return not segment
    word = unquote(segment)
    return len(word) <= PLAIN_SEGMENT_MAX and _PLAIN_WORD.fullmatch(word) is not None


def _query_values(query: str) -> list[str]:
    values = []
    for pair in query.split("&"):
        key, _, value = pair.partition("=")
        if unquote_plus(key).lower() not in PLAIN_KEYS:
            values.append(value)
    return values


def url_parts(url: str) -> list[str]:
    """The credential-like pieces of a URL as written: user info, host tokens, path segments, query values."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url]
    return [
        *_userinfo(parts.netloc),
        *_host_token(parts.scheme.lower(), parts.netloc),
        *(segment for segment in parts.path.split("/") if not _plain_segment(parts.scheme.lower(), segment)),
        *_query_values(parts.query),
    ]


@lru_cache(maxsize=1024)
def url_secrets(url: str) -> tuple[str, ...]:
    """Every form of every credential-like piece of `url`, longest first. Asked on every send, of a handful of URLs
    (one per channel, or per recipient of an e-mail channel): found once each."""
    found = {form for piece in url_parts(url) for form in forms(piece)}
    return tuple(sorted(found, key=len, reverse=True))


def expand(values: Iterable[str]) -> set[str]:
    """All forms of configured secrets; a URL (a channel) also yields all forms of its pieces."""
    found: set[str] = set()
    for value in values:
        if not value:
            continue
        found |= forms(value)
        if "://" in value:
            found.update(url_secrets(value))
    return found


def config_secrets(config: Config) -> set[str]:
    """Everything secret in a configuration, in every form: what logs and answers are scrubbed of."""
    basic = config.server.auth.basic
    found = expand(config.secrets())  # the server's secrets among them
    if basic is not None:
        found.add(base64.b64encode(f"{basic.username}:{basic.password}".encode()).decode())
    # A channel's name is shown everywhere (logs, records, metrics labels): no piece of it is masked.
    names = [name.lower() for name in config.channels]
    return {s for s in found if not any(s.lower() in name for name in names)}


class Redactor:
    """Replaces known secrets in texts, in one pass, the longest first; made by whoever builds the process."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        self._secrets |= {s for s in secrets if len(s) >= MIN_LENGTH}
        if self._secrets:
            # Longest first: a secret that contains another is hidden whole. Case-insensitive, as
            # percent-escapes and hostnames change case on their way through libraries.
            ordered = sorted(self._secrets, key=lambda s: (-len(s), s))
            self._pattern = re.compile("|".join(map(re.escape, ordered)), re.IGNORECASE)

    @classmethod
    def of(cls, config: Config) -> Redactor:
        """What a process built on `config` scrubs: every secret `config_secrets` finds, in all its forms."""
        return cls(expand(config.secrets()) | config_secrets(config))

    def remember(self, config: Config) -> None:
        """Add `config`'s secrets (a reload's): a secret once known stays hidden for the process's life."""
        self.add(expand(config.secrets()) | config_secrets(config))

    def scrub(self, text: str) -> str:
        return self._pattern.sub(MASK, text) if self._pattern is not None else text


# A signed preference or unsubscribe link's token is its person's key (relay.web.links), and the admin API's
# people paths name a person (an e-mail address, maybe): neither is written down.
_PATH_KEY = re.compile(r"(/(?:preferences|unsubscribe|api/v1/people)/)[^/?#\s\"']+")


def hide_path_keys(text: str) -> str:
    """`text` with every signed link's token and every person in an admin API path masked (`/preferences/****`)."""
    return _PATH_KEY.sub(r"\1" + MASK, text) if "/" in text else text
