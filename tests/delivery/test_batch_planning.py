"""Planning in batches (`relay.storage.planning`): one RQ job plans many notifications under load, and no
notification is lost or sent twice when a planning job's worker dies, its job is lost or its planning fails."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from redis import Redis
from rq import Queue
from rq.registry import FinishedJobRegistry

from relay.delivery.jobs import BATCH
from relay.runtime.bootstrap import Runtime
from relay.runtime.worker import ORPHAN_GRACE, STALE_PLANNING, sweep_planning
from relay.storage.planning import CLAIMS, FAILURES, MAX_FAILURES, PENDING, UNPLANNED, Planning
from relay.storage.queue import QUEUE_NAME, planning_job_id
from relay.storage.records import WORKERS
from tests.conftest import run_worker, sample_notification
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
        assert rt.intake.accept(event_id, payload["kind"], json.dumps(payload)) == "accepted"
        events.append(event_id)
    return events


def _states(rt: Runtime, events: list[str]) -> list[str]:
    states: list[str] = []
    for event_id in events:
        states += [r.state for r in rt.store.deliveries(rt.store.event_delivery_ids(event_id)) if r]
    return states


def _planning_jobs(redis: Redis) -> list[str]:
    """The planning jobs run (RQ keeps a finished job RESULT_TTL seconds in its registry)."""
    registry = FinishedJobRegistry(queue=Queue(QUEUE_NAME, connection=redis))
    return [i for i in registry.get_job_ids() if i.startswith("relay-plan-")]


def _all_sent_once(rt: Runtime, sink: HttpSink, events: list[str]) -> None:
    assert _states(rt, events) == ["delivered"] * len(events)
    assert len(sink.at("/hook")) == len(events)
    assert rt.redis.zcard(UNPLANNED) == 0 and rt.redis.hlen(CLAIMS) == 0


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
    jobs = _planning_jobs(redis)
    assert 1 <= len(jobs) <= 60 // BATCH  # far fewer RQ jobs than notifications
    _all_sent_once(hook, sink, events)
    ids = [i for e in events for i in hook.store.event_delivery_ids(e)]
    assert [r.attempts if r else 0 for r in hook.store.deliveries(ids)] == [1] * len(events)


def test_a_notification_at_light_load_gets_its_own_job_at_once(hook: Runtime, redis: Redis, sink: HttpSink) -> None:
    for _ in range(3):
        (event_id,) = _accept(hook)
        assert Queue(QUEUE_NAME, connection=redis).job_ids == [planning_job_id(event_id)]
        run_worker(hook)
        assert not redis.exists(PENDING)  # the job cleared it: the next notification writes its own
    assert len(_planning_jobs(redis)) == 3
    assert len(sink.at("/hook")) == 3


def test_a_duplicate_is_answered_duplicate_and_planned_once(hook: Runtime, redis: Redis, sink: HttpSink) -> None:
    payload = sample_notification(messages=[sample_notification()["messages"][0]])
    event_id, body = payload["metadata"]["eventId"], json.dumps(payload)
    assert hook.intake.accept(event_id, payload["kind"], body) == "accepted"
    assert hook.intake.accept(event_id, payload["kind"], body) == "duplicate"  # while it waits to be planned
    assert redis.zcard(UNPLANNED) == 1
    run_worker(hook)
    assert hook.intake.accept(event_id, payload["kind"], body) == "duplicate"  # once planned
    assert redis.zcard(UNPLANNED) == 0 and Queue(QUEUE_NAME, connection=redis).count == 0
    run_worker(hook)
    _all_sent_once(hook, sink, [event_id])


def test_events_whose_planning_job_was_lost_are_planned_once_the_flag_expires(
    hook: Runtime, redis: Redis, sink: HttpSink
) -> None:
    events = _accept(hook, 5)
    queue = Queue(QUEUE_NAME, connection=redis)
    queue.empty()  # the job lost
    later = time.time() + STALE_PLANNING + 1
    # While the flag lives, a planning job is pending as far as anyone knows: the sweep leaves it be.
    assert sweep_planning(hook, later) == set()
    assert queue.count == 0
    redis.delete(PENDING)  # the flag expired
    sweep_planning(hook, time.time())
    assert queue.count == 0  # they have not waited long yet
    sweep_planning(hook, later)
    assert queue.count == 1 and redis.exists(PENDING)
    sweep_planning(hook, later)
    assert queue.count == 1  # one job is enough
    run_worker(hook)
    _all_sent_once(hook, sink, events)


def test_the_claims_of_a_dead_worker_are_planned_again_and_sent_once(
    hook: Runtime, redis: Redis, sink: HttpSink
) -> None:
    events = _accept(hook, BATCH + 2)
    queue = Queue(QUEUE_NAME, connection=redis)
    queue.empty()  # the dead worker took the job and started it: a batch claimed, then it died
    claimed, left = Planning(redis).claim(DEAD, BATCH, start=True)
    assert len(claimed) == BATCH and left == 2 and not redis.exists(PENDING)
    redis.zadd(WORKERS, {DEAD: time.time()})
    assert sweep_planning(hook, time.time()) == set()  # it beats: its claims are left alone
    assert redis.hlen(CLAIMS) == BATCH and queue.count == 0
    redis.zadd(WORKERS, {DEAD: time.time() - ORPHAN_GRACE - 5})
    sweep_planning(hook, time.time())
    assert redis.hlen(CLAIMS) == 0 and redis.zcard(UNPLANNED) == BATCH + 2
    assert queue.count == 1  # queued at once, whatever the flag says
    assert {int(v) for v in redis.hgetall(FAILURES).values()} == {1}  # each counted once
    run_worker(hook)
    _all_sent_once(hook, sink, events)


def test_an_event_planned_before_its_worker_died_is_planned_again_and_sent_once(
    hook: Runtime, redis: Redis, sink: HttpSink
) -> None:
    """A worker that planned an event (its records stored and sent) and died before it dropped its claim."""
    (event_id,) = _accept(hook)
    run_worker(hook)
    redis.hset(CLAIMS, event_id, DEAD)  # the claim it did not drop
    redis.zadd(WORKERS, {DEAD: time.time() - ORPHAN_GRACE - 5})
    sweep_planning(hook, time.time())
    run_worker(hook)
    _all_sent_once(hook, sink, [event_id])


def test_claims_of_this_worker_with_no_planning_in_hand_go_back_at_the_second_look(
    hook: Runtime, redis: Redis, sink: HttpSink
) -> None:
    """A planning job that could not give back its claims (Redis away a moment) leaves them behind."""
    events = _accept(hook, 3)
    Queue(QUEUE_NAME, connection=redis).empty()
    Planning(redis).claim(hook.name, 3, start=True)  # not this process's planning: nothing in hand
    first = sweep_planning(hook, time.time())
    assert first == set(events) and redis.hlen(CLAIMS) == 3  # only suspected
    assert sweep_planning(hook, time.time(), first) == set()
    assert redis.hlen(CLAIMS) == 0 and Queue(QUEUE_NAME, connection=redis).count == 1
    run_worker(hook)
    _all_sent_once(hook, sink, events)


def test_a_claim_in_hand_is_never_given_back(hook: Runtime, redis: Redis) -> None:
    _accept(hook, 2)
    claimed, _ = hook.intake.planning.claim(hook.name, 2)
    suspects = sweep_planning(hook, time.time())
    assert suspects == set() and sweep_planning(hook, time.time(), {i for i, _ in claimed}) == set()
    assert redis.hlen(CLAIMS) == 2


def test_an_event_whose_planning_fails_is_given_up_after_a_few_tries_and_the_others_are_planned(
    hook: Runtime, redis: Redis, sink: HttpSink, caplog: Any
) -> None:
    good = _accept(hook, 3)
    assert hook.intake.accept("not-json", "notification:x", "{not json") == "accepted"
    good += _accept(hook, 3)
    run_worker(hook)
    _all_sent_once(hook, sink, good)
    assert redis.hget(FAILURES, "not-json") == str(MAX_FAILURES).encode()
    assert "its planning failed on every try" in caplog.text
    assert _gauge(hook, "relay_planning_given_up_total") == 1


def test_a_batch_cut_short_by_its_time_leaves_the_rest_to_the_next_job(
    hook: Runtime, redis: Redis, sink: HttpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    from relay.delivery import jobs

    monkeypatch.setattr(jobs, "BATCH_SECONDS", 0.0)  # every job plans one notification, then stops
    events = _accept(hook, 4)
    run_worker(hook)
    assert len(_planning_jobs(redis)) == 4
    _all_sent_once(hook, sink, events)


def test_an_event_that_failed_before_is_claimed_alone(hook: Runtime, redis: Redis) -> None:
    """A notification that may have killed its planner is planned apart from others: a next failure then
    counts against it alone."""
    events = _accept(hook, 4)
    redis.hset(FAILURES, events[1], 1)
    planning = hook.intake.planning
    assert [i for i, _ in planning.claim("w", BATCH)[0]] == events[:1]
    assert [i for i, _ in planning.claim("w", BATCH)[0]] == [events[1]]
    assert [i for i, _ in planning.claim("w", BATCH, [events[1]])[0]] == events[2:]
    assert not redis.hexists(FAILURES, events[1])  # planned: no longer suspect
