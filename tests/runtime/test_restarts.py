"""The one policy of `relay serve`'s children (its embedded Redis and its workers), on an injected clock: 1 s
doubling to 30 s, back to 1 s after a child stayed up, given up after failed starts in a row, one log line
shape for every child."""

from __future__ import annotations

import logging

import pytest

from relay.runtime.restarts import Backoff, Policy, describe_exit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _run_for(backoff: Backoff, clock: Clock, seconds: float) -> float | None:
    """A child started now that ends `seconds` later; the wait before the next, waited."""
    backoff.started()
    clock.now += seconds
    wait = backoff.ended("worker 42", "exited with code 1")
    clock.now += wait or 0
    return wait


def test_a_child_that_keeps_dying_after_a_while_waits_1_s_doubling_to_30_s_and_is_never_given_up() -> None:
    clock = Clock()
    backoff = Backoff("a worker", clock=clock)
    waits = [_run_for(backoff, clock, 20) for _ in range(8)]
    assert waits == [1, 2, 4, 8, 16, 30, 30, 30]


def test_a_child_that_stayed_up_a_minute_is_restarted_after_1_s_again() -> None:
    clock = Clock()
    backoff = Backoff("a worker", clock=clock)
    assert [_run_for(backoff, clock, 20) for _ in range(4)] == [1, 2, 4, 8]
    assert _run_for(backoff, clock, 60) == 1
    assert _run_for(backoff, clock, 20) == 2


def test_three_failed_starts_in_a_row_give_up_and_a_start_that_held_resets_the_count() -> None:
    clock = Clock()
    backoff = Backoff("a worker", clock=clock)
    assert _run_for(backoff, clock, 0.5) == 1
    assert _run_for(backoff, clock, 9.9) == 2
    assert _run_for(backoff, clock, 10) == 4  # it held through its start window: not a failed start
    assert _run_for(backoff, clock, 0.1) == 8
    assert _run_for(backoff, clock, 0.1) == 16
    assert _run_for(backoff, clock, 0.1) is None
    assert backoff.failed_starts == 3
    assert backoff.failure == (
        "a worker failed to start 3 times in a row (each ended within 10 s of its start, or did not start); "
        "the last one exited with code 1"
    )


def test_a_start_that_raised_is_a_failed_start_however_long_it_took() -> None:
    """The embedded Redis's start waits up to 15 s for it to answer: a start that failed late is still one."""
    clock = Clock()
    backoff = Backoff("the embedded Redis", Policy(give_up_after=2), clock)
    clock.now += 120  # it ran two minutes, then died
    assert backoff.ended("embedded Redis", "killed by SIGKILL") == 1
    backoff.started()
    clock.now += 14
    assert backoff.ended("embedded Redis", "did not start (no answer)", failed=True) == 2
    backoff.started()
    clock.now += 14
    assert backoff.ended("embedded Redis", "did not start (no answer)", failed=True) is None
    assert backoff.failure is not None and backoff.failure.startswith("the embedded Redis failed to start 2 times")


def test_the_policy_is_a_setting_of_the_tests() -> None:
    clock = Clock()
    backoff = Backoff("a worker", Policy(first_delay=0.01, max_delay=0.02, give_up_after=2), clock)
    assert _run_for(backoff, clock, 20) == 0.01
    assert _run_for(backoff, clock, 20) == 0.02
    assert _run_for(backoff, clock, 20) == 0.02
    assert _run_for(backoff, clock, 0) == 0.02
    assert _run_for(backoff, clock, 0) is None


def test_a_start_that_failed_while_what_it_needs_was_away_is_excused_but_still_backed_off() -> None:
    clock = Clock()
    backoff = Backoff("a worker", clock=clock)
    backoff.started()
    clock.now += 1
    assert backoff.ended("worker 42", "exited with code 2", excused=True) == 1
    backoff.started()
    clock.now += 1
    assert backoff.ended("worker 43", "exited with code 2", excused=True) == 2
    assert backoff.failed_starts == 0


def test_every_child_logs_its_restarts_and_its_give_up_in_one_shape(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    with caplog.at_level(logging.WARNING, logger="relay.serve"):
        for child, which, how in (
            ("a worker", "worker 4242", "exited with code 2 (its last line on stderr: boom)"),
            ("the embedded Redis", "embedded Redis", "killed by SIGKILL"),
        ):
            backoff = Backoff(child, Policy(give_up_after=2), clock)
            backoff.ended(which, how)
            backoff.ended(which, how)
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert lines == [
        ("WARNING", "worker 4242 exited with code 2 (its last line on stderr: boom); starting it again in 1 s"),
        (
            "ERROR",
            "a worker failed to start 2 times in a row (each ended within 10 s of its start, or did not start); "
            "the last one exited with code 2 (its last line on stderr: boom); relay serve stops with exit code 3",
        ),
        ("WARNING", "embedded Redis killed by SIGKILL; starting it again in 1 s"),
        (
            "ERROR",
            "the embedded Redis failed to start 2 times in a row (each ended within 10 s of its start, or did "
            "not start); the last one killed by SIGKILL; relay serve stops with exit code 3",
        ),
    ]


def test_describe_exit() -> None:
    assert describe_exit(-9) == "killed by SIGKILL"
    assert describe_exit(1) == "exited with code 1"
