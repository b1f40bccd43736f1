"""The one ownership mechanism (`relay.storage.leases`): one RQ wake-up takes many notifications under load,
and no notification is lost or sent twice when its worker dies, its wake-up is lost or its planning fails."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from redis import Redis
from rq import Queue
from rq.registry import FinishedJobRegistry

from relay.config import DEAD_WORKER_AFTER as ORPHAN_GRACE
from relay.delivery.jobs import BATCH
from relay.runtime.bootstrap import Runtime
from relay.runtime.worker import STALE_SECONDS, Sweep, sweep
from relay.storage.leases import LEASES, LOSSES, MAX_LOSSES, UNPLANNED, WAKE, Leases, event_unit
from relay.storage.work_queue import QUEUE_NAME, wake_job_id
from tests.conftest import accept, run_worker, sample_notification
from tests.servers import HttpSink

DEAD = "relay-dead-worker"


@pytest.fixture
def hook(make_runtime: Callable[..., Runtime], sink: HttpSink) -> Runtime:
    """Every notification of one message makes one delivery, to the sink's /hook."""
    return make_runtime(
        channels={"hook": {"url": sink.url("/hook")}}, routes=[{"channels": ["hook"]}], default={"channels": []}
    )


def _accept(rt: Runtime, count: int = 1) -> list[str]:
    events = []
    for _ in range(count):
        payload = sample_notification(messages=[sample_notification()["messages"][0]])
        event_id = payload["metadata"]["eventId"]
        assert accept(rt, event_id, payload["kind"], json.dumps(payload)) == "accepted"
        events.append(event_id)
        rt.clock.advance(0.001)  # arrived one after the other
    return events


def _states(rt: Runtime, events: list[str]) -> list[str]:
    states: list[str] = []
    for event_id in events:
        states += [r.state for r in rt.store.deliveries(rt.store.event_delivery_ids(event_id)) if r]
    return states


def _wake_ups(redis: Redis) -> list[str]:
    """The wake-up jobs run (RQ keeps a finished job RESULT_TTL seconds in its registry)."""
    registry = FinishedJobRegistry(queue=Queue(QUEUE_NAME, connection=redis))
    return [i for i in registry.get_job_ids() if i.startswith(("relay-plan-", "relay-wake-"))]


def _claims(redis: Redis) -> list[str]:
    """The notifications leased to a worker (planning them)."""
    return [u.decode() for u in redis.hkeys(LEASES) if u.startswith(b"e:")]


def _all_sent_once(rt: Runtime, sink: HttpSink, events: list[str]) -> None:
    assert _states(rt, events) == ["delivered"] * len(events)
    assert len(sink.at("/hook")) == len(events)
    assert rt.redis.zcard(UNPLANNED) == 0 and rt.redis.hlen(LEASES) == 0


def _gauge(rt: Runtime, name: str) -> float:
    from starlette.testclient import TestClient

    from relay.runtime.app import create_app

    with TestClient(create_app(rt)) as client:
        lines = [line for line in client.get("/metrics").text.splitlines() if line.startswith(name + " ")]
    assert len(lines) == 1, lines
    return float(lines[0].split()[1])


def test_notifications_accepted_while_no_worker_runs_are_planned_by_few_jobs_and_sent_once(
    hook: Runtime, redis: Redis, sink: HttpSink
) -> None:
    events = _accept(hook, 60)
    assert Queue(QUEUE_NAME, connection=redis).count == 1  # the first one's job; the others wait for it
    assert redis.zcard(UNPLANNED) == 60
    assert _gauge(hook, "relay_notifications_unplanned") == 60  # the backlog the RQ queue no longer shows
    run_worker(hook)
    assert _gauge(hook, "relay_notifications_unplanned") == 0
    jobs = _wake_ups(redis)
    assert 1 <= len(jobs) <= 60 // BATCH  # far fewer RQ jobs than notifications
    _all_sent_once(hook, sink, events)
    ids = [i for e in events for i in hook.store.event_delivery_ids(e)]
    assert [r.attempts if r else 0 for r in hook.store.deliveries(ids)] == [1] * len(events)


def test_a_notification_at_light_load_gets_its_own_job_at_once(hook: Runtime, redis: Redis, sink: HttpSink) -> None:
    for _ in range(3):
        (event_id,) = _accept(hook)
        assert Queue(QUEUE_NAME, connection=redis).job_ids == [wake_job_id(event_id)]
        run_worker(hook)
        assert not redis.exists(WAKE)  # the job cleared it: the next notification writes its own
    assert len(_wake_ups(redis)) == 3
    assert len(sink.at("/hook")) == 3


def test_a_duplicate_is_answered_duplicate_and_planned_once(hook: Runtime, redis: Redis, sink: HttpSink) -> None:
    payload = sample_notification(messages=[sample_notification()["messages"][0]])
    event_id, body = payload["metadata"]["eventId"], json.dumps(payload)
    assert accept(hook, event_id, payload["kind"], body) == "accepted"
    assert accept(hook, event_id, payload["kind"], body) == "duplicate"  # while it waits to be planned
    assert redis.zcard(UNPLANNED) == 1
    run_worker(hook)
    assert accept(hook, event_id, payload["kind"], body) == "duplicate"  # once planned
    assert redis.zcard(UNPLANNED) == 0 and Queue(QUEUE_NAME, connection=redis).count == 0
    run_worker(hook)
    _all_sent_once(hook, sink, [event_id])


def test_events_whose_wake_up_was_lost_are_planned_without_waiting_for_the_flag(
    hook: Runtime, redis: Redis, sink: HttpSink
) -> None:
    events = _accept(hook, 5)
    queue = Queue(QUEUE_NAME, connection=redis)
    queue.empty()  # the job lost (a failover: queued on the old primary only), its flag left behind
    sweep(hook, hook.clock())
    assert queue.count == 0  # they have not waited long yet
    # The flag names a job RQ does not have: another is queued now, not once the flag expires.
    hook.clock.advance(STALE_SECONDS + 1)
    assert sweep(hook, hook.clock()) == 0
    assert queue.count == 1 and redis.exists(WAKE)
    sweep(hook, hook.clock())
    assert queue.count == 1  # one job is enough
    run_worker(hook)
    _all_sent_once(hook, sink, events)


def test_the_claims_of_a_dead_worker_are_planned_again_and_sent_once(
    hook: Runtime, redis: Redis, sink: HttpSink
) -> None:
    events = _accept(hook, BATCH + 2)
    queue = Queue(QUEUE_NAME, connection=redis)
    queue.empty()  # the dead worker took the job and started it: a batch claimed, then it died
    claimed, left = Leases(redis).claim(DEAD, BATCH, hook.clock(), start=True)
    assert len(claimed) == BATCH and left == 2 and not redis.exists(WAKE)
    hook.store.heartbeat(DEAD)
    assert sweep(hook, hook.clock()) == 0  # it beats: its leases are left alone
    assert len(_claims(redis)) == BATCH and queue.count == 0
    hook.clock.advance(ORPHAN_GRACE + 5)  # and beats no more
    assert sweep(hook, hook.clock()) == BATCH
    assert _claims(redis) == [] and redis.zcard(UNPLANNED) == BATCH + 2
    assert queue.count == 1  # queued at once, whatever the flag says
    assert {int(v) for v in redis.hgetall(LOSSES).values()} == {1}  # each counted once
    run_worker(hook)
    _all_sent_once(hook, sink, events)


def test_an_event_planned_before_its_worker_died_is_planned_again_and_sent_once(
    hook: Runtime, redis: Redis, sink: HttpSink
) -> None:
    """A worker that planned an event (its records stored and sent) and died before it dropped its lease."""
    (event_id,) = _accept(hook)
    run_worker(hook)
    redis.hset(LEASES, event_unit(event_id), DEAD)  # the lease it did not drop
    hook.store.heartbeat(DEAD)
    hook.clock.advance(ORPHAN_GRACE + 5)  # its last beat
    assert sweep(hook, hook.clock()) == 1
    run_worker(hook)
    _all_sent_once(hook, sink, [event_id])


def test_leases_of_this_worker_with_no_work_in_hand_go_back_at_the_second_look(
    hook: Runtime, redis: Redis, sink: HttpSink
) -> None:
    """A wake-up that could not give back its leases (Redis away a moment) leaves them behind."""
    events = _accept(hook, 3)
    Queue(QUEUE_NAME, connection=redis).empty()
    Leases(redis).claim(hook.name, 3, hook.clock(), start=True)  # not this process's claim: nothing in hand
    seen = Sweep()
    assert sweep(hook, hook.clock(), seen) == 0
    assert seen.suspects == {event_unit(e) for e in events} and len(_claims(redis)) == 3  # only suspected
    assert sweep(hook, hook.clock(), seen) == 3
    assert seen.suspects == set()
    assert _claims(redis) == [] and Queue(QUEUE_NAME, connection=redis).count == 1
    run_worker(hook)
    _all_sent_once(hook, sink, events)


def test_a_lease_in_hand_is_never_given_back(hook: Runtime, redis: Redis) -> None:
    _accept(hook, 2)
    claimed, _ = hook.store.leases.claim(hook.name, 2, hook.clock())
    seen = Sweep(suspects={c.unit for c in claimed})
    assert sweep(hook, hook.clock(), seen) == 0 and seen.suspects == set()
    assert len(_claims(redis)) == 2


def test_an_event_whose_planning_fails_is_given_up_after_a_few_tries_and_the_others_are_planned(
    hook: Runtime, redis: Redis, sink: HttpSink, caplog: Any
) -> None:
    good = _accept(hook, 3)
    assert accept(hook, "not-json", "notification:x", "{not json") == "accepted"
    good += _accept(hook, 3)
    run_worker(hook)
    _all_sent_once(hook, sink, good)
    assert redis.hget(LOSSES, event_unit("not-json")) == str(MAX_LOSSES).encode()
    assert "its planning was lost on every try" in caplog.text
    assert hook.store.counters()["relay_planning_given_up_total"] == 1


def test_a_batch_cut_short_by_its_time_leaves_the_rest_to_the_next_job(
    hook: Runtime, redis: Redis, sink: HttpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay.delivery import jobs

    monkeypatch.setattr(jobs, "WORK_SECONDS", 0.0)  # every job plans one notification, then stops
    events = _accept(hook, 4)
    run_worker(hook)
    assert len(_wake_ups(redis)) >= 3  # each takes its own arrival's notification and one more at most
    _all_sent_once(hook, sink, events)


def test_an_event_that_failed_before_is_claimed_alone(hook: Runtime, redis: Redis) -> None:
    """A notification that may have killed its planner is planned apart from others: a next failure then
    counts against it alone."""
    events = _accept(hook, 4)
    redis.hset(LOSSES, event_unit(events[1]), 1)
    leases = hook.store.leases
    assert [c.ident for c in leases.claim(hook.name, BATCH, hook.clock())[0]] == events[:1]
    assert [c.ident for c in leases.claim(hook.name, BATCH, hook.clock())[0]] == [events[1]]
    hook.store.create_deliveries(events[1], [], done=True)  # planned: its lease and its losses dropped
    assert not redis.hexists(LOSSES, event_unit(events[1])) and not redis.hexists(LEASES, event_unit(events[1]))
    assert [c.ident for c in leases.claim(hook.name, BATCH, hook.clock())[0]] == events[2:]


def test_a_due_delivery_leased_to_another_worker_is_looked_at_again_later_not_dropped(
    hook: Runtime, redis: Redis
) -> None:
    """Made due while another worker holds it (a replay racing a send, say): the holder reads its state under
    the lease; the due entry waits RECHECK_SECONDS and is taken once the lease is gone."""
    from relay.storage.leases import READY, RECHECK_SECONDS, delivery_unit

    redis.hset(LEASES, delivery_unit("d-1"), "other-worker")
    hook.store.leases.schedule({"d-1": 100.0})
    now = hook.clock()
    claimed, left = hook.store.leases.claim(hook.name, BATCH, now)
    assert claimed == [] and left == 0
    assert redis.zscore(READY, "d-1") == pytest.approx(now + RECHECK_SECONDS)
    redis.hdel(LEASES, delivery_unit("d-1"))
    assert [c.unit for c in hook.store.leases.claim(hook.name, BATCH, now + RECHECK_SECONDS)[0]] == ["d:d-1"]
    assert redis.hget(LEASES, delivery_unit("d-1")) == hook.name.encode()


def test_a_booked_rate_limit_slot_comes_back_with_the_delivery_once(hook: Runtime, redis: Redis) -> None:
    from relay.storage.leases import READY, SLOTS

    at = hook.clock() + 30
    hook.work.retry_later("d-2", 30, slot_at=at)
    assert redis.zscore(READY, "d-2") == pytest.approx(at, abs=0.5)
    assert hook.store.leases.claim(hook.name, BATCH, hook.clock())[0] == []  # not due yet
    (got,) = hook.store.leases.claim(hook.name, BATCH, at + 1)[0]
    assert (got.kind, got.ident, got.slot) == ("d:", "d-2", pytest.approx(at))
    assert not redis.hexists(SLOTS, "d-2")  # taken with it: a later try books a slot of its own


def test_due_work_comes_out_oldest_first_across_notifications_and_deliveries(hook: Runtime, redis: Redis) -> None:
    from relay.storage.leases import UNPLANNED

    redis.zadd(UNPLANNED, {"ev-old": 10.0, "ev-new": 30.0})
    hook.store.leases.schedule({"del-mid": 20.0, "del-later": 1e12})
    claimed, left = hook.store.leases.claim(hook.name, BATCH, 100.0)
    assert [c.unit for c in claimed] == ["e:ev-old", "d:del-mid", "e:ev-new"] and left == 0


def test_a_redis_error_in_the_middle_of_a_batch_gives_the_rest_back(
    hook: Runtime, redis: Redis, sink: HttpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis gone a moment while a wake-up works through its batch: the units it took and did not work on are
    due again at once (or, were Redis still away, no longer counted in hand, for the sweep), never stuck."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    from relay.delivery import jobs

    events = _accept(hook, 3)
    Queue(QUEUE_NAME, connection=redis).empty()

    def flaky(rt: Runtime, event_id: str) -> int:
        raise RedisConnectionError("gone a moment")

    monkeypatch.setattr(jobs, "plan_event", flaky)
    with pytest.raises(RedisConnectionError):
        jobs.work(hook)
    monkeypatch.undo()
    assert redis.zcard(UNPLANNED) == 2  # the rest: due again at once
    # The unit in hand when Redis went stays leased, no longer counted in hand: this worker's sweep puts it
    # back at its second look.
    assert len(hook.store.leases.held()) == 1 and hook.store.leases.in_hand() == set()
    seen = Sweep()
    sweep(hook, hook.clock(), seen)
    assert sweep(hook, hook.clock(), seen) == 1
    run_worker(hook)
    _all_sent_once(hook, sink, events)


def test_an_outcome_stored_ends_the_count_of_lost_tries(hook: Runtime, redis: Redis, sink: HttpSink) -> None:
    (event_id,) = _accept(hook)
    run_worker(hook)
    (ident,) = hook.store.event_delivery_ids(event_id)
    record = hook.store.delivery(ident)
    assert record is not None
    redis.hset(LOSSES, f"d:{ident}", 2)  # lost twice before
    redis.hset(LEASES, f"d:{ident}", hook.name)
    record.held_lease = True
    hook.store.update(record, record.state)
    assert not redis.hexists(LOSSES, f"d:{ident}") and not redis.hexists(LEASES, f"d:{ident}")


def test_planning_again_leases_nothing_that_exists_and_keeps_a_retrys_wait(
    hook: Runtime, redis: Redis, sink: HttpSink
) -> None:
    """A second planner (another worker, or planning again by hand) finds the records stored: it sends none of
    them, and a retry keeps its time (no Retry-After skipped)."""
    from relay.storage.leases import READY
    from tests.conftest import plan_job

    sink.script["/hook"] = [503]
    (event_id,) = _accept(hook)
    run_worker(hook)
    (ident,) = hook.store.event_delivery_ids(event_id)
    assert hook.store.delivery(ident).state == "retrying"  # type: ignore[union-attr]
    hook.work.retry_later(ident, 3600)  # a service's Retry-After, say
    due = hook.clock() + 3600
    tried = len(sink.hits)
    plan_job(hook, event_id)
    hook.sender.drain()
    assert len(sink.hits) == tried and redis.zscore(READY, ident) == due
    assert redis.hlen(LEASES) == 0


def test_planning_by_hand_takes_the_notification_under_a_lease_like_a_worker(
    hook: Runtime, redis: Redis, sink: HttpSink
) -> None:
    """No unleased planning: by hand, a notification a worker holds is left to it; one nobody holds is taken
    out of the notifications to plan, leased, planned, and its lease dropped with its deliveries stored."""
    from tests.conftest import plan_job

    (event_id,) = _accept(hook)
    redis.hset(LEASES, event_unit(event_id), DEAD)  # a worker plans it this moment
    assert plan_job(hook, event_id) == 0 and hook.store.event_delivery_ids(event_id) == []
    redis.hdel(LEASES, event_unit(event_id))
    assert plan_job(hook, event_id) == 1 and redis.zscore(UNPLANNED, event_id) is None
    hook.sender.drain()
    assert len(sink.at("/hook")) == 1 and redis.hlen(LEASES) == 0


@pytest.mark.parametrize("old_job", ["plan_batch", "deliver_job", "delivery_job_failed"])
def test_a_job_queued_by_an_older_relay_fails_in_rq_and_the_sweep_takes_its_unit(
    hook: Runtime, redis: Redis, sink: HttpSink, old_job: str
) -> None:
    """After an upgrade, a job an older relay queued names a function that is gone: RQ fails it, and the unit it
    was for still waits in its due set (since relay's leases, every unit does), so the heartbeat's sweep wakes
    a worker for it, dropping the flag that the failed job never cleared."""
    (event_id,) = _accept(hook)
    queue = Queue(QUEUE_NAME, connection=redis)
    queue.empty()  # the accept's own wake-up, as an older API would have queued its job instead
    flag = redis.get(WAKE)
    assert flag is not None
    queue.enqueue_call(f"relay.delivery.jobs.{old_job}", args=(event_id,), job_id=flag.decode())
    run_worker(hook)
    assert queue.failed_job_registry.get_job_ids() == [flag.decode()] and len(sink.at("/hook")) == 0
    assert redis.zscore(UNPLANNED, event_id) is not None and redis.get(WAKE) == flag
    assert sweep(hook, hook.clock() + STALE_SECONDS + 1) == 0 and redis.get(WAKE) != flag
    run_worker(hook)
    _all_sent_once(hook, sink, [event_id])
