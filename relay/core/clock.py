"""The one clock relay stores and compares times by (epoch seconds), built once and handed to every part (a test
moves them all at once: tests/clock.py). `system_clock` is the one read of the wall clock; `time.monotonic()` is for
a process's own durations; "due now" across machines also asks Redis (`WorkQueue.now_everywhere`)."""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], float]


def system_clock() -> float:
    """The wall clock (epoch seconds): what a running relay uses."""
    return time.time()
