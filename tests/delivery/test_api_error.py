"""relay.delivery.answers.api_error: why a JSON API (Slack's Web API) refused a call, in words."""

from __future__ import annotations

import pytest

from relay.delivery.answers import api_error

LOOKUP = "https://slack.com/api/users.lookupByEmail?email=a%40example.com"


@pytest.mark.parametrize(
    ("url", "body", "expected"),
    [
        (LOOKUP, b'{"ok":false,"error":"users_not_found"}', "users.lookupByEmail answered users_not_found"),
        (
            "https://slack.com/api/chat.postMessage",
            b'{"ok": false, "error": "missing_scope", "needed": "chat:write", "provided": "users:read"}',
            "chat.postMessage answered missing_scope (needed: chat:write)",
        ),
        ("https://hooks.example.com/", b'{"ok":false,"error":"nope"}', "the service answered nope"),
        (LOOKUP, b'{"ok":true,"user":{"id":"U1"}}', None),
        (LOOKUP, b'{"error":"no ok field"}', None),
        (LOOKUP, b'{"ok":false,"error":"has spaces and <html>"}', None),  # not a code: not repeated
        (LOOKUP, b'{"ok":false,"error":42}', None),
        (LOOKUP, b'{"ok":false', None),
        (LOOKUP, b"ok", None),
        (LOOKUP, b'["ok", false]', None),
        (LOOKUP, b'{"ok":false,"error":"x"}' + b" " * 70_000, None),  # too large to read
    ],
)
def test_api_error(url: str, body: bytes, expected: str | None) -> None:
    found = api_error(url, body)
    assert (found[1] if found else None) == expected
