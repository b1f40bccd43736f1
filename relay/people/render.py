"""The people's pages as HTML: Jinja templates (autoescaped, no JavaScript), and headers that keep the
page's signed link to itself (no referrer, no cache, no framing)."""

from __future__ import annotations

import secrets
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.responses import HTMLResponse

_env = Environment(
    loader=PackageLoader("relay.people", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    nonce = secrets.token_urlsafe(16)
    html = _env.get_template(name).render(style_nonce=nonce, **context)
    policy = (
        f"default-src 'none'; style-src 'nonce-{nonce}'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
    return HTMLResponse(
        html,
        status,
        headers={
            "Content-Security-Policy": policy,
            "X-Frame-Options": "DENY",
            "X-Content-Type-Options": "nosniff",
            # The page's address is its key: never sent on to another site, never kept by a cache. Not
            # no-referrer: a browser then sends `Origin: null` with the page's own forms.
            "Referrer-Policy": "same-origin",
            "Cache-Control": "no-store",
            "X-Robots-Tag": "noindex",
        },
    )
