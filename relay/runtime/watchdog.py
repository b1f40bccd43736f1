"""Job timeouts for worker threads, kept by one watchdog thread per process.

RQ's `TimerDeathPenalty` starts a `threading.Timer`, a new thread, for every job it guards, and cancels it
a few milliseconds later: on a short job that thread costs more than the job's own Redis work. Here one
daemon thread keeps every armed deadline in a heap and raises the timeout in the job's thread the same way
RQ's does (an asynchronous exception), so a job that overruns ends exactly as it would under RQ.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from rq.timeouts import JobTimeoutException, TimerDeathPenalty

log = logging.getLogger("relay.runtime.watchdog")


class Watchdog:
    """Deadlines armed and disarmed from any thread; each that is reached armed runs its callback."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._armed: set[int] = set()
        self._serial = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, fire: Callable[[], None]) -> int:
        with self._cond:
            token = next(self._serial)
            heapq.heappush(self._heap, (time.monotonic() + seconds, token, fire))
            self._armed.add(token)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="relay-watchdog", daemon=True)
                self._thread.start()
            elif self._heap[0][1] == token:
                self._cond.notify()  # the new deadline is the nearest: wake the watchdog to wait less
            return token

    def disarm(self, token: int) -> None:
        with self._cond:
            self._armed.discard(token)
            # Disarmed deadlines leave the heap when they come to its top; a heap mostly of them (jobs
            # end long before their timeout) is rebuilt, so it stays the size of the jobs in hand.
            if len(self._heap) > 64 + 2 * len(self._armed):
                self._heap = [entry for entry in self._heap if entry[1] in self._armed]
                heapq.heapify(self._heap)

    def pending(self) -> int:
        with self._cond:
            return len(self._armed)

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][1] not in self._armed:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                deadline, token, fire = self._heap[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
                self._armed.discard(token)
                # Under the lock: a disarm that races with this either came first, or waits until after.
                try:
                    fire()
                except Exception:
                    log.exception("a job timeout could not be raised in its thread")


WATCHDOG = Watchdog()


class WatchdogDeathPenalty(TimerDeathPenalty):
    """RQ's `TimerDeathPenalty` (same exception, same message, raised the same way), armed on the shared
    watchdog instead of on a new thread per job."""

    def __init__(self, timeout: Any, exception: Any = JobTimeoutException, **kwargs: Any) -> None:
        super().__init__(timeout, exception, **kwargs)  # type: ignore[no-untyped-call]
        self._token: int | None = None

    def setup_death_penalty(self) -> None:
        if self._timeout <= 0:
            return
        self._token = WATCHDOG.arm(self._timeout, self.handle_death_penalty)

    def cancel_death_penalty(self) -> None:
        if self._token is not None:
            WATCHDOG.disarm(self._token)
            self._token = None
