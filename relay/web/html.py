"""An HTML page as relay answers it: one style block (a nonce), no script, never framed, sniffed or cached."""

from __future__ import annotations

import secrets
from collections.abc import Callable

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.responses import HTMLResponse


def templates(package: str, folder: str) -> Environment:
    """A package's page templates: autoescaped, every variable they name required."""
    loader = PackageLoader(package, folder)
    return Environment(loader=loader, autoescape=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def secure_page(render: Callable[[str], str], status: int = 200, headers: dict[str, str] | None = None) -> HTMLResponse:
    """`render(nonce)` (the template, given its style block's nonce) as an answer with relay's page headers."""
    nonce = secrets.token_urlsafe(16)
    policy = (
        f"default-src 'none'; style-src 'nonce-{nonce}'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
    return HTMLResponse(
        render(nonce),
        status,
        headers={
            "Content-Security-Policy": policy,
            "X-Frame-Options": "DENY",
            "X-Content-Type-Options": "nosniff",
            # Not no-referrer: a browser then sends `Origin: null` with the page's own forms.
            "Referrer-Policy": "same-origin",
            "Cache-Control": "no-store",
            **(headers or {}),
        },
    )
