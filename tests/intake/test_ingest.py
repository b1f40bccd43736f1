"""WorkQueue in one round trip: dedup, the event and its place among the unplanned, atomically; the wake-up job,
when none is queued, through RQ's own enqueue."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from redis import Redis
from rq import Queue
from rq.job import Job, JobStatus
from starlette.testclient import TestClient

from relay.runtime.bootstrap import Runtime
from relay.storage.leases import UNPLANNED, WAKE, WAKE_TTL
from relay.storage.records import METRICS, RECEIVED, event_key, metric_field
from relay.storage.work_queue import (
    JOB_TIMEOUT,
    QUEUE_NAME,
    RESULT_TTL,
    WORK_JOB,
    QueueUnavailable,
    job_id,
    wake_job_id,
)
from tests.conftest import accept, post, run_worker, sample_notification
from tests.servers import HttpSink


def _accept(rt: Runtime, payload: dict[str, Any] | None = None) -> tuple[str, str]:
    import json

    payload = payload or sample_notification()
    event_id = payload["metadata"]["eventId"]
    answer = accept(rt, event_id, payload["kind"], json.dumps(payload))
    rt.clock.advance(0.001)  # the next one arrives later
    return event_id, answer


@pytest.mark.parametrize(
    "event_id",
    ["6f1c2a9e-3b7d-4c51-9a0e-2d8f5b7c1e44", 'it\'s "quoted" \\ and ünïcode ✓', "x" * 300],
)
def test_the_wake_up_job_is_rqs_own(rt: Runtime, redis: Redis, event_id: str) -> None:
    """relay writes no key of RQ's: the job is enqueued by RQ's `enqueue_call` and read back by RQ."""
    import json

    payload = sample_notification()
    payload["metadata"]["eventId"] = event_id
    assert accept(rt, event_id, payload["kind"], json.dumps(payload)) == "accepted"
    queue = Queue(QUEUE_NAME, connection=redis)
    assert queue.job_ids == [wake_job_id(event_id)]
    job = Job.fetch(wake_job_id(event_id), connection=redis)
    assert (job.func_name, job.args, job.kwargs) == (WORK_JOB, (event_id,), {})
    assert (job.result_ttl, job.failure_ttl, job.timeout) == (RESULT_TTL, rt.store.retention, JOB_TIMEOUT)
    # RQ owns nothing: a wake-up lost or abandoned loses no work (`relay.storage.leases`), so RQ retries none.
    assert job.retries_left is None


def test_accepted_notification_is_seen_by_rq_and_run_by_a_real_worker(
    rt: Runtime, redis: Redis, sink: HttpSink
) -> None:
    event_id, status = _accept(rt)
    assert status == "accepted"
    queue = Queue(QUEUE_NAME, connection=redis)
    assert queue.count == 1
    assert f"rq:queue:{QUEUE_NAME}".encode() in redis.smembers("rq:queues")
    assert [q.name for q in Queue.all(connection=redis)] == [QUEUE_NAME]
    job = queue.fetch_job(queue.job_ids[0])
    assert job is not None
    assert job.id == wake_job_id(event_id) and job.id.startswith(job_id("plan", ""))
    assert job.get_status() == JobStatus.QUEUED
    assert job.func_name == WORK_JOB and job.args == (event_id,)
    assert job.retries_left is None and job.timeout == JOB_TIMEOUT

    # The event, its index entry and its counter went in with the job. The record is the dedup (no key of its
    # own), kept for the retention or the dedup window, whichever is longer; its payload has its kind.
    assert set(redis.hkeys(event_key(event_id))) == {b"receivedAt", b"payload"}
    stored = rt.store.event(event_id)
    assert stored is not None and stored.kind == "notification:access-control-request-failed"
    # Its entry among those received: the same time, in ms, as its record's receivedAt.
    assert redis.hget(event_key(event_id), "receivedAt") == f"{stored.receivedAt:.3f}".encode()
    entry_id = f"{round(stored.receivedAt * 1000)}-0".encode()
    assert redis.xrange(RECEIVED) == [(entry_id, {b"eventId": event_id.encode()})]
    kept = max(rt.store.retention, int(rt.config.dedup_ttl))
    assert kept - 5 < redis.ttl(event_key(event_id)) <= kept
    field = metric_field("relay_notifications_received_total", kind="notification:access-control-request-failed")
    assert redis.hget(METRICS, field) == b"1"

    run_worker(rt)
    assert queue.count == 0
    # Done: the job's hash expires within RESULT_TTL seconds (RQ's result_ttl), nothing else of it is left.
    assert 0 < redis.ttl(f"rq:job:{job.id}") <= RESULT_TTL
    assert len(sink.at("/owners")) == 1
    deliveries = rt.store.deliveries(rt.store.event_delivery_ids(event_id))
    assert deliveries and all(d is not None and d.state in {"delivered", "skipped"} for d in deliveries)


def test_a_wake_up_job_is_written_only_when_none_is_queued(rt: Runtime, redis: Redis) -> None:
    queue = Queue(QUEUE_NAME, connection=redis)
    first, _ = _accept(rt)
    # The flag names the job written with it, and lives a short while (a job lost is seen by the sweep).
    assert redis.get(WAKE) == wake_job_id(first).encode()
    assert 0 < redis.ttl(WAKE) <= WAKE_TTL
    later = [_accept(rt)[0] for _ in range(4)]
    assert queue.job_ids == [wake_job_id(first)]
    # Every event waits among the unplanned, at the time it was received, oldest first.
    assert [v.decode() for v in redis.zrange(UNPLANNED, 0, -1)] == [first, *later]
    assert redis.zscore(UNPLANNED, first) == float(redis.hget(event_key(first), "receivedAt") or 0)
    # A wake-up starts (clears the flag): the next notification writes a job of its own.
    rt.store.leases.claim(rt.name, 2, rt.clock(), start=True)
    nxt, _ = _accept(rt)
    assert queue.job_ids == [wake_job_id(first), wake_job_id(nxt)]
    assert redis.zcard(UNPLANNED) == 4


def test_duplicate_is_counted_and_enqueues_nothing(rt: Runtime, redis: Redis) -> None:
    payload = sample_notification()
    assert _accept(rt, payload)[1] == "accepted"
    assert _accept(rt, payload)[1] == "duplicate"
    assert _accept(rt, payload)[1] == "duplicate"
    assert Queue(QUEUE_NAME, connection=redis).count == 1
    assert redis.zcard(UNPLANNED) == 1
    assert redis.hget(METRICS, metric_field("relay_notifications_duplicate_total")) == b"2"


def test_unreachable_redis_is_queue_unavailable_and_writes_nothing(rt: Runtime, redis: Redis, tmp_path: Any) -> None:
    import asyncio

    from redis.asyncio import Redis as AsyncRedis

    dead = AsyncRedis(unix_socket_path=str(tmp_path / "nothing.sock"), socket_connect_timeout=0.5)
    with pytest.raises(QueueUnavailable):
        asyncio.run(rt.work.accept_async(dead, "e-1", "notification:x", "{}"))
    assert not redis.exists(event_key("e-1"))


def test_async_intake_loads_the_script_again_after_a_redis_restart(rt: Runtime, redis: Redis) -> None:
    import asyncio

    from relay.runtime.bootstrap import open_async_redis, redis_url
    from relay.storage.work_queue import Acceptance

    async def run() -> list[Acceptance]:
        client = open_async_redis(redis_url(rt.config))
        try:
            out = [await rt.work.accept_async(client, "async-1", "notification:x", "{}")]
            redis.script_flush()  # what a restarted server looks like to the client
            out.append(await rt.work.accept_async(client, "async-2", "notification:x", "{}"))
            out.append(await rt.work.accept_async(client, "async-2", "notification:x", "{}"))
            return out
        finally:
            await client.aclose()

    answers = asyncio.run(run())
    # The first asks for a wake-up (none was queued); the second finds one queued.
    assert answers == [
        Acceptance("accepted", wake_job_id("async-1")),
        Acceptance("accepted"),
        Acceptance("duplicate"),
    ]
    assert redis.zcard(UNPLANNED) == 2
    assert Queue(QUEUE_NAME, connection=redis).count == 0  # the caller enqueues it, after answering
    assert rt.work.queue_wake(wake_job_id("async-1"), "async-1")
    assert Queue(QUEUE_NAME, connection=redis).job_ids == [wake_job_id("async-1")]


def test_the_webhook_queues_the_wake_up_after_its_answer(client: TestClient, redis: Redis) -> None:
    first, second = sample_notification(), sample_notification()
    assert post(client, first).status_code == 202
    assert post(client, second).status_code == 202
    queue = Queue(QUEUE_NAME, connection=redis)
    assert queue.job_ids == [wake_job_id(first["metadata"]["eventId"])]
    assert redis.zcard(UNPLANNED) == 2


def test_a_wake_up_that_could_not_be_queued_is_made_by_the_sweep(rt: Runtime, redis: Redis) -> None:
    """Redis gone between the accept and RQ's enqueue: the notification is durable and waits among the
    unplanned; once the flag has expired, the workers' sweep queues a wake-up for it."""
    from relay.runtime.worker import sweep

    payload = sample_notification()
    dead = Queue(QUEUE_NAME, connection=Redis(unix_socket_path="/nonexistent/redis.sock"))
    rt.work.queue, live = dead, rt.work.queue
    event_id, status = _accept(rt, payload)
    rt.work.queue = live
    assert status == "accepted" and live.count == 0 and redis.zscore(UNPLANNED, event_id) is not None
    redis.delete(WAKE)  # the flag's lifetime ended
    sweep(rt, float(redis.zscore(UNPLANNED, event_id) or 0) + 60)
    assert len(live.job_ids) == 1


def test_async_intake_without_redis_is_queue_unavailable(rt: Runtime, tmp_path: Any) -> None:
    import asyncio

    from redis.asyncio import Redis as AsyncRedis

    async def run() -> None:
        dead = AsyncRedis(unix_socket_path=str(tmp_path / "nothing.sock"), socket_connect_timeout=0.5)
        try:
            await rt.work.accept_async(dead, "async-dead", "notification:x", "{}")
        finally:
            await dead.aclose()

    with pytest.raises(QueueUnavailable):
        asyncio.run(run())


def test_a_repeat_is_a_duplicate_within_the_dedup_window_and_accepted_after_it(
    rt: Runtime, redis: Redis, sink: HttpSink
) -> None:
    """The event record is the dedup: its receivedAt against relay's clock. Accepted again after the window, the
    record keeps the ids of the deliveries planned before (planning it again finds them: nothing sent twice)."""
    payload = sample_notification()
    event_id, status = _accept(rt, payload)
    assert status == "accepted"
    run_worker(rt)
    ids = rt.store.event_delivery_ids(event_id)
    assert len(ids) == 3 and len(sink.hits) == 2  # two of the three go to the hook
    window = rt.config.dedup_ttl
    rt.clock.advance(window - 1)
    assert _accept(rt, payload)[1] == "duplicate"
    assert redis.hget(METRICS, metric_field("relay_notifications_duplicate_total")) == b"1"
    rt.clock.advance(1.5)
    at = rt.clock()
    redis.hset(event_key(event_id), "trace", "00-ab-cd-01")  # its first intake's, with tracing on
    assert accept(rt, event_id, payload["kind"], json.dumps(payload)) == "accepted"
    stored = rt.store.event(event_id)
    assert stored is not None and at - 0.001 < stored.receivedAt <= at and stored.deliveries == ids  # in ms
    assert stored.trace == ""  # this intake's (none: tracing is off)
    assert accept(rt, event_id, payload["kind"], json.dumps(payload)) == "duplicate"  # a new window


def test_the_record_outlives_a_retention_shorter_than_the_dedup_window(
    make_runtime: Callable[..., Runtime], redis: Redis
) -> None:
    rt = make_runtime(retention=3600, dedup_ttl=7200)
    payload = sample_notification()
    event_id, _ = _accept(rt, payload)
    assert 7195 < redis.ttl(event_key(event_id)) <= 7200
    rt.clock.advance(7100)  # past the retention, in the window
    assert _accept(rt, payload)[1] == "duplicate"
