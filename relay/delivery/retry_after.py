"""What a throttled service asked for: the `Retry-After` of 429 and 503 answers.

Apprise hides responses, so a hook on requests' Session.send notes the Retry-After of each answer
in a per-thread slot that a send opens (`watch`); relay sends in the calling thread, so the value
a send sees is its own, never a neighbour's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from email.utils import parsedate_to_datetime
from typing import Any

import requests

from relay.delivery.thread_scope import scoped

MAX_WAIT = 24 * 3600.0
_local = threading.local()


class Asked:
    """The longest wait the services asked for during one send."""

    def __init__(self) -> None:
        self.wait: float | None = None

    def note(self, wait: float) -> None:
        self.wait = wait if self.wait is None else max(self.wait, wait)


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
        return response

    requests.Session.send = send  # type: ignore[method-assign]


@contextmanager
def watch() -> Iterator[Asked]:
    """Collect the Retry-After answers of the requests this thread makes inside the block."""
    with scoped(_local, "asked", Asked()) as asked:
        yield asked


_install()  # once, as the module is first imported (under Python's import lock)
