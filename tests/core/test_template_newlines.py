"""docs/templates.md, "Line breaks around tags": what it says of relay's template environment holds."""

from __future__ import annotations

import pytest

from relay.core.sandbox import make_environment

CONTEXT = {"failed": True, "requester": "Alice"}


@pytest.mark.parametrize(
    ("source", "rendered"),
    [
        ("Status: {% if failed %}failed{% endif %}\nRequested by {{ requester }}", "Status: failedRequested by Alice"),
        (
            "Status: {% if failed %}failed{% endif +%}\nRequested by {{ requester }}",
            "Status: failed\nRequested by Alice",
        ),
        (
            "Status: {% if failed %}failed{% endif %}\n\nRequested by {{ requester }}",
            "Status: failed\nRequested by Alice",
        ),
        ("Status: {% if failed %}failed{%+ endif %}\nRequested by {{ requester }}", "Status: failedRequested by Alice"),
        (
            "Status:\n  {% if failed %}\nfailed\n  {% endif %}\nRequested by {{ requester }}",
            "Status:\nfailed\nRequested by Alice",
        ),
    ],
)
def test_the_newline_after_a_tag_is_dropped_and_plus_or_a_blank_line_keeps_it(source: str, rendered: str) -> None:
    assert make_environment(None).from_string(source).render(CONTEXT) == rendered
