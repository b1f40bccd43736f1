"""The admin page's HTML: Jinja templates (autoescaped, no JavaScript) and the headers every page carries."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.responses import HTMLResponse

from relay.storage.store import iso
from relay.web.html import secure_page

_env = Environment(
    loader=PackageLoader("relay.admin", "ui_templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def ago(ts: float, now: float) -> str:
    seconds = max(0, int(now - ts))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago" if seconds >= 5 else "just now"


def until(ts: float, now: float) -> str:
    seconds = int(ts - now)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"in {seconds // size} {unit}"
    return f"in {seconds} s" if seconds >= 5 else "due now"


def when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def render(
    name: str, now: float, status: int = 200, headers: dict[str, str] | None = None, **context: Any
) -> HTMLResponse:
    return secure_page(
        lambda nonce: _env.get_template(name).render(
            style_nonce=nonce,
            ago=lambda ts: ago(ts, now),
            until=lambda ts: until(ts, now),
            when=when,
            iso=iso,
            quote=quote,
            urlencode=urlencode,
            **context,
        ),
        status,
        headers,
    )


def error_page(
    now: float, status: int, title: str, message: str, headers: dict[str, str] | None = None
) -> HTMLResponse:
    return render("error.html.j2", now, status, headers, title=title, message=message)
