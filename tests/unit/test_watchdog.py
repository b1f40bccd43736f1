"""Job timeouts raised by one watchdog thread, not a thread per job."""

from __future__ import annotations

import threading
import time

import pytest
from rq.timeouts import JobTimeoutException

from relay.runtime.watchdog import Watchdog, WatchdogDeathPenalty


def test_a_deadline_reached_fires_and_a_disarmed_one_does_not() -> None:
    dog = Watchdog()
    fired: list[str] = []
    kept = dog.arm(0.05, lambda: fired.append("kept"))
    dropped = dog.arm(0.05, lambda: fired.append("dropped"))
    dog.disarm(dropped)
    time.sleep(0.3)
    assert fired == ["kept"]
    dog.disarm(kept)  # after firing: nothing happens
    assert dog.pending() == 0


def test_a_nearer_deadline_armed_later_is_not_held_up_by_a_far_one() -> None:
    dog = Watchdog()
    fired = threading.Event()
    far = dog.arm(60, lambda: None)
    started = time.monotonic()
    dog.arm(0.05, fired.set)
    assert fired.wait(2)
    assert time.monotonic() - started < 1
    dog.disarm(far)


def test_many_short_jobs_start_no_thread_each_and_leave_no_heap_behind() -> None:
    dog = Watchdog()
    dog.disarm(dog.arm(60, lambda: None))  # the watchdog's own thread, started once
    threads = threading.active_count()
    for _ in range(10_000):
        dog.disarm(dog.arm(60, lambda: None))
    assert threading.active_count() == threads
    assert dog.pending() == 0
    assert len(dog._heap) <= 64


def test_the_timeout_is_raised_in_the_jobs_own_thread_with_rqs_message() -> None:
    caught: list[BaseException] = []

    def job() -> None:
        try:
            with WatchdogDeathPenalty(1, JobTimeoutException):
                for _ in range(100):
                    time.sleep(0.05)
        except JobTimeoutException as exc:
            caught.append(exc)

    thread = threading.Thread(target=job)
    started = time.monotonic()
    thread.start()
    thread.join(10)
    assert len(caught) == 1
    assert str(caught[0]) == "Task exceeded maximum timeout value (1 seconds)"
    assert 0.9 < time.monotonic() - started < 3


def test_a_job_done_in_time_is_left_alone() -> None:
    with WatchdogDeathPenalty(1, JobTimeoutException):
        time.sleep(0.01)
    time.sleep(1.2)  # past the deadline: nothing is raised here


@pytest.mark.parametrize("timeout", [0, -1])
def test_no_timeout_arms_nothing(timeout: int) -> None:
    penalty = WatchdogDeathPenalty(timeout, JobTimeoutException)
    with penalty:
        pass
    assert penalty._token is None
