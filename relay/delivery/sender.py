"""The worker process's senders: a bounded set of threads that send the deliveries RQ jobs hand over. A send mostly
waits on the network and RQ runs one job at a time, so a job leases its deliveries, hands them here and returns. It
first waits for room (`wait_for_room`) while as much work again is queued as there are threads, so that RQ takes no
more than the process can send, but never longer than MAX_WAIT, so a job always ends well within its timeout. What
is handed here and not finished when the process dies is found by its lease."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger("relay.delivery.sender")
MAX_WAIT = 5.0


class Sender:
    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._cond = threading.Condition()
        self._in_hand: Counter[str] = Counter()  # the names (delivery ids) of the tasks pending, how many each

    def wait_for_room(self) -> bool:
        """Wait (at most MAX_WAIT) while twice `threads` tasks are pending; False when still full."""
        with self._cond:
            return self._cond.wait_for(lambda: self._in_hand.total() < 2 * self.threads, timeout=MAX_WAIT)

    def submit(self, task: Callable[[], object], name: str = "delivery") -> None:
        """Run `task` in a sender thread (queued while all are busy)."""
        with self._cond:
            self._in_hand[name] += 1
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="relay-send")
            pool = self._pool
        pool.submit(self._run, task, name)

    def _run(self, task: Callable[[], object], name: str) -> None:
        try:
            task()
        except Exception:  # tasks handle their own failures; this is the last line, so the thread lives on
            log.exception("sending %s failed unexpectedly", name)
        finally:
            with self._cond:
                self._in_hand -= Counter((name,))  # a name at 0 leaves the counter
                self._cond.notify_all()

    @property
    def pending(self) -> int:
        with self._cond:
            return self._in_hand.total()

    def in_hand(self) -> set[str]:
        """The names of the tasks pending (queued or running)."""
        with self._cond:
            return set(self._in_hand)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until nothing is pending; False when `timeout` passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._in_hand, timeout=timeout)
