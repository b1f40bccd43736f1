"""The people's pages as HTML, with headers that keep the page's signed link to itself."""

from __future__ import annotations

from typing import Any

from starlette.responses import HTMLResponse

from relay.web.html import secure_page, templates

_env = templates("relay.people", "templates")


def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    # The page's address is its key: kept out of caches and other sites (relay.web.html), and out of indexes.
    return secure_page(
        lambda nonce: _env.get_template(name).render(style_nonce=nonce, **context),
        status,
        {"X-Robots-Tag": "noindex"},
    )
