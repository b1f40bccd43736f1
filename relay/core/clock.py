"""The one clock relay stores and compares times by: epoch seconds, asked of one function that the runtime's
builder (`relay.runtime.bootstrap.build`) makes once and hands to the store, the intake, the app, the workers
and the commands. Records' createdAt and updatedAt, the due times of the work, leases' grace and the sweep,
holds, windows, sessions, signatures, rate-limit slots, outage probes and silences all read it, so a time
written by one part is compared by another on the same clock, and a test moves them all at once
(`ManualClock`).

`system_clock` is the only place relay reads the wall clock. `time.monotonic()` stays where a process measures
a duration or a deadline of its own (a render's time limit, how long a send took, a backoff), which nothing
stores nor compares with another process. No Lua script reads Redis `TIME`: each is handed this clock's time;
one that must compare across processes by Redis's clock would say so where it does.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], float]


def system_clock() -> float:
    """The wall clock (epoch seconds): what a running relay uses."""
    return time.time()


class ManualClock:
    """A clock for tests, moved by `set` and `advance` (never a sleep): it stands still where it was set, or,
    on a `base` clock (`system_clock`, for a test that measures real spacing), goes on from there at its pace."""

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
