"""Credentials of webhook callers and of admins; every comparison in constant time."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence

from relay.config import HmacAuth, ServerConfig, StandardWebhooksAuth, WebhookAuth

# Unix seconds, optionally with a fraction; anything else is refused before any arithmetic.
_TIMESTAMP = re.compile(r"\d{1,12}(?:\.\d{1,9})?")
_SIG_PREFIX = "sha256="


def _equal(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def any_equal(given: Sequence[bytes], expected: Sequence[bytes]) -> bool:
    """Whether one of `given` is one of `expected`: every pair compared, in constant time and without stopping
    early, so that timing says nothing about which matched."""
    found = False
    for candidate in given:
        for wanted in expected:
            found |= hmac.compare_digest(candidate, wanted)
    return found


def _any_equal(given: str, expected: list[str]) -> bool:
    return any_equal([given.encode()], [token.encode() for token in expected])


def _bearer(headers: Mapping[str, str]) -> str | None:
    value = headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def webhook_allowed(server: ServerConfig, headers: Mapping[str, str]) -> bool:
    auth = server.auth
    if not auth.enabled:
        return True
    if auth.tokens:
        for candidate in (_bearer(headers), headers.get(auth.header.lower())):
            if candidate and _any_equal(candidate, auth.tokens):
                return True
    if auth.basic is not None:
        value = headers.get("authorization", "")
        scheme, _, encoded = value.partition(" ")
        if scheme.lower() == "basic":
            try:
                user, _, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError, ValueError):
                return False
            ok_user = _equal(user, auth.basic.username)
            ok_password = _equal(password, auth.basic.password)
            return ok_user and ok_password
    return False


def admin_token_offered(headers: Mapping[str, str]) -> bool:
    """Whether a call carries an admin token at all (in either of the headers `admin_allowed` reads)."""
    return bool(_bearer(headers) or headers.get("x-relay-admin-token"))


def admin_allowed(server: ServerConfig, headers: Mapping[str, str]) -> bool:
    if not server.admin_tokens:
        return True
    token = _bearer(headers) or headers.get("x-relay-admin-token")
    return bool(token) and _any_equal(token or "", server.admin_tokens)


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The hex HMAC-SHA256 of `timestamp + "." + body`: what a sender puts in the signature header."""
    return hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def signature_offered(server: ServerConfig, headers: Mapping[str, str]) -> bool:
    """Whether the call may be signed: only then is the body read before the caller is known."""
    auth = server.auth
    return (auth.hmac is not None and bool(headers.get(auth.hmac.header.lower()))) or (
        auth.standard_webhooks is not None and bool(headers.get("webhook-signature"))
    )


def body_signature_problem(auth: WebhookAuth, headers: Mapping[str, str], body: bytes, now: float) -> str | None:
    """The call's signature checked: Standard Webhooks' when its header came, else relay's own."""
    if auth.standard_webhooks is not None and headers.get("webhook-signature"):
        return standard_signature_problem(auth.standard_webhooks, headers, body, now)
    return signature_problem(auth.hmac, headers, body, now) if auth.hmac is not None else "no signature"


def _given_signatures(value: str) -> list[bytes]:
    # Several may be sent, comma-separated, so a sender can sign with an old and a new secret at once.
    found = []
    for part in value.split(","):
        part = part.strip()
        if part[: len(_SIG_PREFIX)].lower() == _SIG_PREFIX:
            part = part[len(_SIG_PREFIX) :]
        if part:
            found.append(part.lower().encode())
    return found


def signature_problem(signed: HmacAuth, headers: Mapping[str, str], body: bytes, now: float) -> str | None:
    """None when the call carries a fresh, valid signature; else why not (for the log, never the answer)."""
    timestamp = headers.get(signed.timestamp_header.lower(), "").strip()
    if not _TIMESTAMP.fullmatch(timestamp):
        return "missing or malformed signature timestamp"
    if abs(now - float(timestamp)) > signed.tolerance:
        return "signature timestamp outside the tolerance"
    given = _given_signatures(headers.get(signed.header.lower(), ""))
    expected = [sign(secret, timestamp, body).encode() for secret in signed.secrets]
    return None if any_equal(given, expected) else "signature mismatch"


def standard_signature_problem(
    signed: StandardWebhooksAuth, headers: Mapping[str, str], body: bytes, now: float
) -> str | None:
    """Standard Webhooks' `v1,` signatures, space-separated. None when valid, else why not."""
    msg_id = headers.get("webhook-id", "")
    timestamp = headers.get("webhook-timestamp", "").strip()
    if not msg_id or not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > 12:
        return "missing webhook-id or malformed webhook-timestamp"
    if abs(now - int(timestamp)) > signed.tolerance:
        return "webhook-timestamp outside the tolerance"
    content = f"{msg_id}.{timestamp}.".encode() + body
    expected = [base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()) for key in signed.keys]
    # Only v1 is defined; a sender may send other versions beside it (the spec's upgrade path).
    signatures = (part.partition(",") for part in headers.get("webhook-signature", "").split())
    given = [sig.encode() for version, _, sig in signatures if version == "v1"]
    return None if any_equal(given, expected) else "signature mismatch"
