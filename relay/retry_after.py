"""What a throttled service asked for: the `Retry-After` of 429 and 503 answers.

Apprise hides responses (and sends from its own thread pool), so a hook on requests' Session.send
notes each Retry-After with the time it arrived; a send then takes the largest one that arrived
while it ran. With several sends at once in one process this may borrow a neighbour's value, which
is then a wait asked by the same kind of service.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from email.utils import parsedate_to_datetime
from typing import Any

import requests

MAX_WAIT = 24 * 3600.0
_seen: deque[tuple[float, float]] = deque(maxlen=1000)
_lock = threading.Lock()
_installed = False


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


def install() -> None:
    global _installed
    with _lock:
        if _installed:
            return
        original = requests.Session.send

        def send(self: requests.Session, request: Any, **kwargs: Any) -> Any:
            response = original(self, request, **kwargs)
            if response.status_code in (429, 503):
                wait = parse(response.headers.get("Retry-After"))
                if wait is not None:
                    with _lock:
                        _seen.append((time.monotonic(), wait))
            return response

        requests.Session.send = send  # type: ignore[method-assign]
        _installed = True


def asked_since(start: float) -> float | None:
    """The longest wait a service asked for since `start` (time.monotonic())."""
    with _lock:
        waits = [wait for at, wait in _seen if at >= start]
    return max(waits) if waits else None
