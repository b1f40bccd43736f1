"""The people's pages as HTML, with headers that keep the page's signed link to itself."""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.responses import HTMLResponse

from relay.web.html import secure_page

_env = Environment(
    loader=PackageLoader("relay.people", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    # The page's address is its key: kept out of caches and other sites (relay.web.html), and out of indexes.
    return secure_page(
        lambda nonce: _env.get_template(name).render(style_nonce=nonce, **context),
        status,
        {"X-Robots-Tag": "noindex"},
    )
