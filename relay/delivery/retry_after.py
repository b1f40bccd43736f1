"""What a throttled service asked for: the `Retry-After` of 429 and 503 answers; and why a JSON API
refused a call (Slack's `{"ok": false, "error": "users_not_found"}`), which Apprise does not log.

Apprise hides responses, so a hook on requests' Session.send notes the Retry-After of each answer
in a per-thread slot that a send opens (`watch`); relay sends in the calling thread, so the value
a send sees is its own, never a neighbour's.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import requests

from relay.delivery.thread_scope import scoped

MAX_WAIT = 24 * 3600.0
_local = threading.local()
# An API's error code as Slack writes them (users_not_found, missing_scope); anything else is not shown.
_CODE = re.compile(r"[A-Za-z0-9_.:,-]{1,100}")
_MAX_ERROR_BODY = 65_536


class Asked:
    """The longest wait the services asked for during one send, and the errors their APIs answered."""

    def __init__(self) -> None:
        self.wait: float | None = None
        self.api_errors: list[str] = []

    def note(self, wait: float) -> None:
        self.wait = wait if self.wait is None else max(self.wait, wait)


def api_error(url: str, body: bytes) -> str | None:
    """`users.lookupByEmail answered users_not_found` from a JSON answer `{"ok": false, "error": ...}`."""
    if len(body) > _MAX_ERROR_BODY or b'"ok"' not in body:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("ok") is not False:
        return None
    code, needed = data.get("error"), data.get("needed")
    if not isinstance(code, str) or not _CODE.fullmatch(code):
        return None
    method = urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]
    text = f"{method} answered {code}" if _CODE.fullmatch(method) else f"the service answered {code}"
    if isinstance(needed, str) and _CODE.fullmatch(needed):
        text += f" (needed: {needed})"
    return text


def parse(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After value: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_WAIT)
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return min(max(0.0, when - (now if now is not None else time.time())), MAX_WAIT)


def _install() -> None:
    original = requests.Session.send

    def send(self: requests.Session, request: Any, **kwargs: Any) -> Any:
        response = original(self, request, **kwargs)
        asked: Asked | None = getattr(_local, "asked", None)
        if asked is not None and response.status_code in (429, 503):
            wait = parse(response.headers.get("Retry-After"))
            if wait is not None:
                asked.note(wait)
        if asked is not None and not kwargs.get("stream"):
            error = api_error(str(request.url), response.content)
            if error is not None:
                asked.api_errors.append(error)
        return response

    requests.Session.send = send  # type: ignore[method-assign]


@contextmanager
def watch() -> Iterator[Asked]:
    """Collect the Retry-After answers of the requests this thread makes inside the block."""
    with scoped(_local, "asked", Asked()) as asked:
        yield asked


_install()  # once, as the module is first imported (under Python's import lock)
