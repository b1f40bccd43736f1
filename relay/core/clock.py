"""The one clock relay stores and compares times by (epoch seconds), made once by the runtime's builder and
handed to every part, so that a time one part writes another compares on the same clock, and a test moves
them all at once (`ManualClock`). `system_clock` is the only place relay reads the wall clock;
`time.monotonic()` stays for a process's own durations, which nothing stores. No Lua script reads Redis `TIME`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], float]


def system_clock() -> float:
    """The wall clock (epoch seconds): what a running relay uses."""
    return time.time()


class ManualClock:
    """A clock for tests, moved by `set` and `advance`; on a `base` clock it goes on at that clock's pace."""

    def __init__(self, start: float, base: Clock | None = None) -> None:
        self.base = base
        self.offset = start - self._base()

    def _base(self) -> float:
        return self.base() if self.base is not None else 0.0

    def __call__(self) -> float:
        return self.offset + self._base()

    def set(self, when: float) -> None:
        self.offset = when - self._base()

    def advance(self, seconds: float) -> float:
        """`seconds` later; the time it is now."""
        self.offset += seconds
        return self()
