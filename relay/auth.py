"""Credentials of webhook callers and of admins; every comparison in constant time."""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Mapping

from relay.config import ServerConfig


def _equal(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def _any_equal(given: str, expected: list[str]) -> bool:
    # Compare against every token, without stopping early, so timing says nothing about which matched.
    found = False
    for token in expected:
        found |= _equal(given, token)
    return found


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


def admin_allowed(server: ServerConfig, headers: Mapping[str, str]) -> bool:
    if not server.admin_tokens:
        return True
    token = _bearer(headers) or headers.get("x-relay-admin-token")
    return bool(token) and _any_equal(token or "", server.admin_tokens)
