"""The one clock relay stores and compares times by (epoch seconds), made once by the runtime's builder and
handed to every part, so that a time one part writes another compares on the same clock, and a test moves
them all at once (tests/clock.py). `system_clock` is the only place relay reads the wall clock; `time.monotonic()`
stays for a process's own durations, which nothing stores. No Lua script reads Redis `TIME`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], float]


def system_clock() -> float:
    """The wall clock (epoch seconds): what a running relay uses."""
    return time.time()
