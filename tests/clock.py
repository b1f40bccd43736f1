"""The clock the tests move (`set`, `advance`) and hand to the runtime they build (relay.core.clock)."""

from __future__ import annotations

from relay.core.clock import Clock


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
