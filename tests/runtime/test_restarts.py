"""The back-off of `relay serve`'s worker restarts, on an injected clock: 1 s doubling to 30 s, back to 1 s
after a worker stayed up, and given up after failed starts in a row."""

from __future__ import annotations

from relay.runtime.restarts import Backoff, Policy


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _run_for(backoff: Backoff, clock: Clock, seconds: float) -> float | None:
    """A worker started now that ends `seconds` later; the wait before the next, waited."""
    backoff.started()
    clock.now += seconds
    wait = backoff.exited()
    clock.now += wait or 0
    return wait


def test_a_worker_that_keeps_dying_after_a_while_waits_1_s_doubling_to_30_s_and_is_never_given_up() -> None:
    clock = Clock()
    backoff = Backoff(clock=clock)
    waits = [_run_for(backoff, clock, 20) for _ in range(8)]
    assert waits == [1, 2, 4, 8, 16, 30, 30, 30]


def test_a_worker_that_stayed_up_a_minute_is_restarted_after_1_s_again() -> None:
    clock = Clock()
    backoff = Backoff(clock=clock)
    assert [_run_for(backoff, clock, 20) for _ in range(4)] == [1, 2, 4, 8]
    assert _run_for(backoff, clock, 60) == 1
    assert _run_for(backoff, clock, 20) == 2


def test_three_failed_starts_in_a_row_give_up_and_a_start_that_held_resets_the_count() -> None:
    clock = Clock()
    backoff = Backoff(clock=clock)
    assert _run_for(backoff, clock, 0.5) == 1
    assert _run_for(backoff, clock, 9.9) == 2
    assert _run_for(backoff, clock, 10) == 4  # it held through its start window: not a failed start
    assert _run_for(backoff, clock, 0.1) == 8
    assert _run_for(backoff, clock, 0.1) == 16
    assert _run_for(backoff, clock, 0.1) is None
    assert backoff.failed_starts == 3


def test_the_policy_is_a_setting_of_the_tests() -> None:
    clock = Clock()
    backoff = Backoff(Policy(first_delay=0.01, max_delay=0.02, give_up_after=2), clock)
    assert _run_for(backoff, clock, 20) == 0.01
    assert _run_for(backoff, clock, 20) == 0.02
    assert _run_for(backoff, clock, 20) == 0.02
    assert _run_for(backoff, clock, 0) == 0.02
    assert _run_for(backoff, clock, 0) is None


def test_a_start_that_failed_while_what_it_needs_was_away_is_excused_but_still_backed_off() -> None:
    clock = Clock()
    backoff = Backoff(clock=clock)
    backoff.started()
    clock.now += 1
    assert backoff.exited(excused=True) == 1
    backoff.started()
    clock.now += 1
    assert backoff.exited(excused=True) == 2
    assert backoff.failed_starts == 0
