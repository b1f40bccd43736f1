"""When `relay serve` starts a dead worker again, and when it gives up on one that cannot start.

A worker that ends is started again after a back-off: 1 s, doubling up to 30 s. One that stayed up
`STEADY_AFTER` seconds had started well, so its next restart waits 1 s again. One that ends within
`START_WINDOW` seconds of its start failed to start; `GIVE_UP_AFTER` such failures in a row and `relay
serve` exits non-zero with the cause, for its service manager (systemd, Kubernetes) to see and restart.
A worker that dies after running a while (Redis gone for a minute) is never given up on: it is retried,
at most every 30 s; nor is one that fails to start while relay serve's embedded Redis is being brought back
(its keeper gives up on its own, `relay.runtime.redis_keeper`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

FIRST_DELAY = 1.0
MAX_DELAY = 30.0
STEADY_AFTER = 60.0
START_WINDOW = 10.0
GIVE_UP_AFTER = 3


@dataclass(frozen=True)
class Policy:
    first_delay: float = FIRST_DELAY
    max_delay: float = MAX_DELAY
    steady_after: float = STEADY_AFTER
    start_window: float = START_WINDOW
    give_up_after: int = GIVE_UP_AFTER


DEFAULT_POLICY = Policy()


class Backoff:
    """One worker slot's restarts: call `started` at each start and `exited` at each end."""

    def __init__(self, policy: Policy = DEFAULT_POLICY, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.clock = clock
        self.delay = policy.first_delay
        self.failed_starts = 0  # in a row
        self.started_at = clock()

    def started(self) -> None:
        self.started_at = self.clock()

    def exited(self, excused: bool = False) -> float | None:
        """The worker ended now: seconds to wait before starting the next, or None to give up. An `excused`
        end (what it needed was away: relay serve's own Redis, being brought back) counts as no failed start."""
        up_for = self.clock() - self.started_at
        if up_for >= self.policy.steady_after:
            self.delay = self.policy.first_delay
        if up_for >= self.policy.start_window:
            self.failed_starts = 0
        elif not excused:
            self.failed_starts += 1
        if self.failed_starts >= self.policy.give_up_after:
            return None
        wait = self.delay
        self.delay = min(self.delay * 2, self.policy.max_delay)
        return wait
