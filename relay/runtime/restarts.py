"""The one policy by which `relay serve` keeps its children running: its embedded Redis and its workers.

- A child that ends is started again after a back-off: 1 s, doubling up to 30 s. One that stayed up
  `STEADY_AFTER` seconds had started well, so its next restart waits 1 s again.
- A failed start: a start that raised (the embedded Redis did not answer), or a child that ended within
  `START_WINDOW` seconds of its start. After `GIVE_UP_AFTER` failed starts in a row relay serve gives up: it
  stops, prints the cause as its last line and exits with `GIVE_UP_EXIT_CODE`, for its service manager
  (systemd, Docker, Kubernetes) to see and restart. A child that dies after running a while (Redis gone for
  a minute) is never given up on: it is restarted, at most every 30 s.
- An end while what the child needs is away (a worker while the embedded Redis is being brought back) is
  excused: backed off, but no failed start.
- One log line shape for every child: `<child> <how it ended>; starting it again in <N> s`, and at the give-up
  `<child> failed to start <N> times in a row (...); the last one <how it ended>; relay serve stops ...`.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("relay.serve")
FIRST_DELAY = 1.0
MAX_DELAY = 30.0
STEADY_AFTER = 60.0
START_WINDOW = 10.0
GIVE_UP_AFTER = 3
GIVE_UP_EXIT_CODE = 3
POLL_SECONDS = 0.25  # how often the children are looked at


@dataclass(frozen=True)
class Policy:
    first_delay: float = FIRST_DELAY
    max_delay: float = MAX_DELAY
    steady_after: float = STEADY_AFTER
    start_window: float = START_WINDOW
    give_up_after: int = GIVE_UP_AFTER


DEFAULT_POLICY = Policy()


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


class Backoff:
    """One child's restarts (a worker's slot, the embedded Redis): `started` at each start, `ended` at each end
    or failed start. `child` names it in the give-up ("a worker", "the embedded Redis")."""

    def __init__(
        self, child: str, policy: Policy = DEFAULT_POLICY, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.child = child
        self.policy = policy
        self.clock = clock
        self.delay = policy.first_delay
        self.failed_starts = 0  # in a row
        self.started_at = clock()
        self.failure: str | None = None  # why relay serve gave up on the child

    def started(self) -> None:
        self.started_at = self.clock()

    def ended(self, which: str, how: str, excused: bool = False, failed: bool = False) -> float | None:
        """`which` (the child as the log names it now) ended, `how` (its exit, or why it did not start; `failed`:
        it did not start at all): the seconds to wait before the next start, logged; or None to give up,
        logged, with the cause in `failure`. An `excused` end counts as no failed start."""
        up_for = self.clock() - self.started_at
        if up_for >= self.policy.steady_after and not failed:
            self.delay = self.policy.first_delay
        if up_for >= self.policy.start_window and not failed:
            self.failed_starts = 0
        elif not excused:
            self.failed_starts += 1
        if self.failed_starts >= self.policy.give_up_after:
            self.failure = (
                f"{self.child} failed to start {self.failed_starts} times in a row (each ended within "
                f"{self.policy.start_window:g} s of its start, or did not start); the last one {how}"
            )
            log.error("%s; relay serve stops with exit code %d", self.failure, GIVE_UP_EXIT_CODE)
            return None
        wait = self.delay
        self.delay = min(self.delay * 2, self.policy.max_delay)
        log.warning("%s %s; starting it again in %g s", which, how, wait)
        return wait
