"""The admin page's HTML: Jinja templates (autoescaped, no JavaScript), the headers every page carries, and
what the OpenAPI document says of its pages."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from starlette.responses import HTMLResponse

from relay.storage.store import iso
from relay.web.html import secure_page, templates
from relay.web.operation import ADMIN_SECURITY, FORM, FORM_FIELDS, Answer, Operation, html_answer

_env = templates("relay.admin", "ui_templates")


def _span(seconds: int) -> str:
    """A span in its largest whole unit: `3 h`, `12 min`, `40 s`."""
    unit, size = next(((u, n) for u, n in (("d", 86400), ("h", 3600), ("min", 60)) if seconds >= n), ("s", 1))
    return f"{seconds // size} {unit}"


def ago(ts: float, now: float) -> str:
    seconds = max(0, int(now - ts))
    return f"{_span(seconds)} ago" if seconds >= 5 else "just now"


def until(ts: float, now: float) -> str:
    seconds = int(ts - now)
    return f"in {_span(seconds)}" if seconds >= 5 else "due now"


def render(
    name: str, now: float, status: int = 200, headers: dict[str, str] | None = None, **context: Any
) -> HTMLResponse:
    return secure_page(
        lambda nonce: _env.get_template(name).render(
            style_nonce=nonce,
            ago=lambda ts: ago(ts, now),
            until=lambda ts: until(ts, now),
            iso=iso,
            quote=quote,
            urlencode=urlencode,
            **context,
        ),
        status,
        headers,
    )


_SECURITY: list[dict[str, list[str]]] = [*ADMIN_SECURITY, {"adminSession": []}, {}]  # no admin token configured: open


def page_operation(summary: str, answers: dict[int, Answer], form: bool = False) -> Operation:
    """A page's operation (HTML answers) or, with `form`, a form's."""
    fields = FORM_FIELDS if form else None
    return Operation(summary, answers, request=fields, request_media=FORM, security=_SECURITY, tags=("admin page",))


# Admin tokens sent in a header to a page count with the admin API's refusals (relay/web/throttle.py).
THROTTLED = html_answer("Too many wrong admin tokens from this address: wait Retry-After seconds")


def viewed(shown: str, more: dict[int, str]) -> dict[int, Answer]:
    """The answers of a page one views (`more`: its own errors)."""
    answers = {200: html_answer(shown), 303: Answer("Not logged in: to /ui/login"), 429: THROTTLED}
    return answers | {s: html_answer(t) for s, t in {**more, 503: "Redis is unavailable"}.items()}


def posted(done: str, more: dict[int, str]) -> dict[int, Answer]:
    """The answers of a button's form (`more`: its own errors)."""
    errors = {401: "Not logged in", 403: "Not from this page", 503: "Redis is unavailable", **more}
    return {303: Answer(done), 429: THROTTLED} | {s: html_answer(t) for s, t in errors.items()}
