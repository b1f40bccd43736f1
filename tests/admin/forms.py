"""What the admin page's form tests share: the CSRF token of a page, and the requests a forged form sends."""

from __future__ import annotations

import re
from typing import Any

import pytest


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', html)
    assert found, "no CSRF token in the page"
    return found.group(1)


# A form posted from elsewhere: its fields ("CSRF": the page's right token) and headers; each is refused 403.
CROSS_SITE: Any = pytest.mark.parametrize(
    ("form", "headers"),
    [
        ({}, {}),  # no CSRF token
        ({"csrf": "0" * 64}, {}),  # a wrong one
        ({"csrf": "CSRF"}, {"Origin": "http://evil.example"}),  # the right one, from another site
        ({"csrf": "CSRF"}, {"Origin": "null"}),
        ({"csrf": "CSRF"}, {"Referer": "http://evil.example/page"}),
    ],
)
