"""The one policy by which `relay serve` keeps its children running, its embedded Redis and its workers
(docs/container.md, "Supervision"; `Policy`): a back-off of 1 s doubling to 30 s, back to 1 s after a child stayed up
a minute; a give-up (exit `GIVE_UP_EXIT_CODE`) after 3 failed starts in a row (a start that raised, or a child that
ended within 10 s); an end excused while what the child needs is away; one log line shape for every child."""

from __future__ import annotations

import logging
import signal
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Self, TypeVar

log = logging.getLogger("relay.serve")
GIVE_UP_EXIT_CODE = 3
POLL_SECONDS = 0.25  # how often the children are looked at
C = TypeVar("C")


@dataclass(frozen=True)
class Policy:
    first_delay: float = 1.0
    max_delay: float = 30.0
    steady_after: float = 60.0
    start_window: float = 10.0
    give_up_after: int = 3


DEFAULT_POLICY = Policy()


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


class Backoff:
    """One child's restarts; `child` names it in the give-up ("a worker", "the embedded Redis")."""

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
        """The seconds to wait before the next start, or None to give up (the cause in `failure`); both logged.
        An `excused` end counts as no failed start."""
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


@dataclass
class Slot(Generic[C]):
    backoff: Backoff
    child: C | None = None  # None: ended; started again at `start_at`
    start_at: float = 0.0


class Keeper(ABC, Generic[C]):
    """A thread looks at every slot each `poll` seconds; it lives until `stop` or the give-up, since a child gets
    SIGTERM when the thread that started it ends (`relay.runtime.children`)."""

    def __init__(self, name: str, slots: list[Slot[C]], on_give_up: Callable[[], None], poll: float) -> None:
        self.slots = slots
        self.on_give_up = on_give_up
        self.poll = poll
        self.failure: str | None = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._watch, name=name, daemon=True)

    @abstractmethod
    def _spawn(self) -> C: ...

    @abstractmethod
    def _ended(self, child: C) -> tuple[str, str, bool] | None: ...  # None while it runs, else which, how, excused

    @abstractmethod
    def _not_started(self, exc: Exception) -> tuple[str, str]: ...

    def start(self) -> Self:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(30)

    def _watch(self) -> None:
        while self.failure is None and not self.stopping.is_set():
            for slot in self.slots:
                self._tend(slot)
            self.stopping.wait(self.poll)

    def _tend(self, slot: Slot[C]) -> None:
        if slot.child is not None:
            ended = self._ended(slot.child)
            if ended is None:
                return
            slot.child = None
            if self.stopping.is_set():
                return
            self._back_off(slot, *ended)
        if self.failure is None and slot.backoff.clock() >= slot.start_at and not self.stopping.is_set():
            slot.backoff.started()
            try:
                slot.child = self._spawn()
            except Exception as exc:  # whatever stops a child from starting, it counts as a failed start
                self._back_off(slot, *self._not_started(exc), failed=True)

    def _back_off(self, slot: Slot[C], which: str, how: str, excused: bool = False, failed: bool = False) -> None:
        wait = slot.backoff.ended(which, how, excused, failed)
        if wait is None:
            self.failure = slot.backoff.failure
            self.on_give_up()
        else:
            slot.start_at = slot.backoff.clock() + wait
