"""Each channel's shared state in Redis (relay.outages.store): failures in a row, down and up, one probe at
a time across the fleet, the waiting deliveries and their order, the last hour's sends. Real Redis; the
clock is a number handed in."""

from __future__ import annotations

import random

import pytest
from redis import Redis

from relay.outages.model import MAX_PROBE, OK, PERMANENT, SHARE_HALF_LIFE, TRANSIENT
from relay.outages.store import ChannelStates, Gate
from relay.storage.leases import READY

T0 = 1_800_000_000.0
CH = "owners-slack"


@pytest.fixture
def states(redis: Redis) -> ChannelStates:
    return ChannelStates(redis)


def note(states: ChannelStates, kind: str, at: float = T0, ident: str = "d0", probing: bool = False) -> Gate:
    return states.note(CH, kind, "HTTP 503", ident, at, at, took=0.2, after=5, probe=30.0, probing=probing)


def gate(states: ChannelStates, at: float, ident: str = "x", created: float | None = None) -> Gate:
    return states.gate(CH, ident, created if created is not None else at, 30.0, at)


def test_down_after_five_transient_failures_in_a_row(states: ChannelStates) -> None:
    for i in range(4):
        assert note(states, TRANSIENT, T0 + i).state == "up"
    assert gate(states, T0 + 4).state == "up"
    down = note(states, TRANSIENT, T0 + 5)
    assert down.state == "down" and down.since == T0 + 5 and down.last_error == "HTTP 503"
    assert gate(states, T0 + 6).state == "down"


def test_permanent_failures_neither_count_nor_break_the_row_and_a_success_does(states: ChannelStates) -> None:
    for _ in range(4):
        note(states, TRANSIENT)
    assert note(states, PERMANENT).state == "up"
    assert note(states, TRANSIENT).state == "down"  # the fifth transient one in a row

    other = "other"
    for _ in range(4):
        states.note(other, TRANSIENT, "e", "d", T0, T0, after=5, probe=30.0)
    states.note(other, OK, "", "d", T0, T0, after=5, probe=30.0)
    assert states.note(other, TRANSIENT, "e", "d", T0, T0, after=5, probe=30.0).state == "up"


def test_with_the_rule_off_a_channel_is_never_down(states: ChannelStates) -> None:
    for _ in range(20):
        assert states.note(CH, TRANSIENT, "e", "d", T0, T0).state == "up"
    [health] = states.health([CH], T0)
    assert not health.down and health.failed_last_hour == 20


def test_one_probe_at_a_time_across_the_fleet_backing_off_to_ten_minutes(states: ChannelStates) -> None:
    for _ in range(5):
        note(states, TRANSIENT)
    assert gate(states, T0 + 29.9).state == "down"
    first, second = gate(states, T0 + 30, "a"), gate(states, T0 + 30, "b")  # two workers at the same moment
    assert sorted([first.state, second.state]) == ["down", "probe"]
    note(states, TRANSIENT, T0 + 31, "a", probing=True)  # the probe failed: the next is 60 s later
    assert gate(states, T0 + 90).state == "down"
    assert gate(states, T0 + 91).state == "probe"
    at = T0 + 91.0
    for _ in range(10):  # failed probes double the wait, up to MAX_PROBE
        note(states, TRANSIENT, at, probing=True)
        waits = [w for w in (60, 120, 240, 480, 600, 601) if gate(states, at + w).state == "probe"]
        at += waits[0]
    assert waits[0] == MAX_PROBE


def test_waiting_deliveries_are_due_at_the_probe_and_all_due_oldest_first_when_it_succeeds(
    states: ChannelStates, redis: Redis
) -> None:
    for _ in range(5):
        note(states, TRANSIENT, ident="first")  # `first` (created at T0) made it down: it probes next
    for i, ident in enumerate(["c", "b", "a"]):  # created later, older to newer: c, b, a
        gate(states, T0 + 1, ident, created=T0 + 1 + i)
    due = dict(redis.zrange(READY, 0, -1, withscores=True))
    assert due[b"first"] == T0 + 30  # the oldest waiting is due at the probe
    assert due[b"c"] == T0 + 30 + MAX_PROBE  # the others later: a safety net should the probe be lost

    redis.zrem(READY, "first")  # taken by a worker
    assert gate(states, T0 + 30, "first", created=T0).state == "probe"
    resumed = note(states, OK, T0 + 31, "first", probing=True)
    assert resumed == Gate("resumed", resumed=("c", "b", "a"))  # oldest first
    assert [m.decode() for m in redis.zrange(READY, 0, -1)] == ["c", "b", "a"]  # due now, by createdAt
    assert dict(redis.zrange(READY, 0, -1, withscores=True))[b"c"] == T0 + 1
    assert gate(states, T0 + 32).state == "up"
    assert not redis.exists("relay:channel:owners-slack:waiting")


def test_a_probe_that_fails_permanently_hands_the_next_probe_to_the_oldest_waiting(
    states: ChannelStates, redis: Redis
) -> None:
    for _ in range(5):
        note(states, TRANSIENT, ident="p")  # `p` made it down, and probes
    gate(states, T0 + 1, "old", created=T0 + 1)
    gate(states, T0 + 2, "new", created=T0 + 2)
    assert gate(states, T0 + 30, "p", created=T0).state == "probe"
    redis.zadd(READY, {"old": T0 + 999})
    assert note(states, PERMANENT, T0 + 31, "p", probing=True).state == "up"  # it fails; the channel stays down
    assert redis.zscore(READY, "old") == T0 + 60  # due at the next probe time (the one the probe took)
    assert gate(states, T0 + 40).state == "down"


def test_health_counts_the_last_hour_and_the_gauge_reads_the_fleet_state(states: ChannelStates) -> None:
    for i in range(19):
        states.note(CH, OK, "", f"d{i}", T0, T0, took=0.2, after=5, probe=30.0)
    states.note(CH, OK, "", "slow", T0, T0, took=4.0, after=5, probe=30.0)
    note(states, TRANSIENT, T0 + 60)
    [h] = states.health([CH], T0 + 120)
    assert (h.delivered_last_hour, h.failed_last_hour) == (20, 1)
    assert h.p95_send_seconds == 0.25 and h.last_success_at == T0 and h.last_error == "HTTP 503"
    [later] = states.health([CH], T0 + 3600)  # the first minute is more than an hour old
    assert (later.delivered_last_hour, later.failed_last_hour) == (0, 1)
    assert states.up() == {CH: 1.0}
    for _ in range(5):
        note(states, TRANSIENT)
    assert states.up() == {CH: 0.0}


def test_a_probe_that_ends_without_an_outcome_leaves_the_next_probe_to_the_oldest_waiting(
    states: ChannelStates, redis: Redis
) -> None:
    for _ in range(5):
        note(states, TRANSIENT, ident="p")
    gate(states, T0 + 1, "old", created=T0 + 1)
    assert gate(states, T0 + 30, "p", created=T0).state == "probe"
    assert redis.zscore(READY, "old") == T0 + 60  # skipped, or its worker gone: `old` probes at the next time


def sends(states: ChannelStates, start: float, per_second: float, outcomes: list[str]) -> list[Gate]:
    """`outcomes` noted one after another at `per_second` from `start` (relay's clock, handed in)."""
    return [note(states, kind, start + i / per_second, f"d{i}") for i, kind in enumerate(outcomes)]


def test_a_flaky_channel_is_never_down_however_long_its_rows_of_failures_by_chance(states: ChannelStates) -> None:
    # 20 sends a second for five minutes, one in ten failing at random, and every 25 s a row of 5 to 8 failures:
    # what a channel failing 10% at random meets by chance (about once an hour at this rate, for a row of five).
    chance = random.Random(48)
    outcomes = [TRANSIENT if chance.random() < 0.1 else OK for _ in range(6000)]
    for at in range(250, 6000, 500):
        outcomes[at : at + 5 + at % 4] = [TRANSIENT] * (5 + at % 4)
    gates = sends(states, T0, 20, outcomes)
    assert {g.state for g in gates} == {"up"}
    [health] = states.health([CH], T0 + 300)
    assert not health.down and health.failed_last_hour >= 600


def test_a_busy_channel_that_dies_is_down_within_seconds_and_a_quiet_one_at_the_fifth_failure(
    states: ChannelStates,
) -> None:
    # A minute of successes at 20/s, then nothing but failures: down once the failures weigh as much as the
    # successes of the last seconds (SHARE_HALF_LIFE), not at the fifth one.
    gates = sends(states, T0, 20, [OK] * 1200 + [TRANSIENT] * 400)
    first_down = next(i for i, g in enumerate(gates) if g.state == "down")
    assert 0.8 * SHARE_HALF_LIFE <= (first_down - 1200) / 20 <= 1.2 * SHARE_HALF_LIFE

    # Successes a minute old weigh almost nothing: the fifth failure in a row makes it down, as on a fresh channel.
    other = ChannelStates(states.redis)
    quiet = [other.note("quiet", OK, "", "q", T0, T0 + i, after=5, probe=30.0) for i in range(10)]
    fails = [other.note("quiet", TRANSIENT, "e", f"f{i}", T0, T0 + 70 + i, after=5, probe=30.0) for i in range(5)]
    assert {g.state for g in quiet} == {"up"} and [g.state for g in fails] == ["up"] * 4 + ["down"]


def test_workers_whose_clocks_disagree_by_seconds_weigh_the_same_sends(states: ChannelStates) -> None:
    # Two workers taking turns, one's clock 2 s behind the other's: the recent successes weigh as they would on
    # one clock (no gap decays twice), so a row of failures by chance still leaves a flaky channel up.
    chance = random.Random(7)
    outcomes = [TRANSIENT if chance.random() < 0.1 else OK for _ in range(800)] + [TRANSIENT] * 5
    gates = [note(states, kind, T0 + i / 40 - 2.0 * (i % 2), f"d{i}") for i, kind in enumerate(outcomes)]
    assert {g.state for g in gates} == {"up"}
    # A clock an hour ahead, once, does not freeze the weights for the others: the next one starts again from its
    # own time, so 10 s of successes weigh nothing 90 s later, and the fifth failure in a row makes it down.
    note(states, OK, T0 + 3600)
    sends(states, T0 + 100, 20, [OK] * 200)
    later = [note(states, TRANSIENT, T0 + 200 + i, f"f{i}") for i in range(5)]
    assert [g.state for g in later] == ["up"] * 4 + ["down"]
