"""Intake in one round trip: the script writes exactly what RQ's own enqueue would, atomically."""

from __future__ import annotations

from typing import Any

import pytest
from redis import Redis
from rq import Queue
from rq.job import Job, JobStatus

from relay.runtime.bootstrap import Runtime
from relay.storage.planning import PENDING, PENDING_TTL, UNPLANNED
from relay.storage.queue import CRASH_RETRY, PLAN_JOB, QUEUE_NAME, RESULT_TTL, QueueUnavailable, job_id
from relay.storage.rq_enqueue import zlib_or_raw
from relay.storage.store import EVENTS, METRICS, dedup_key, event_key, metric_field
from tests.conftest import run_worker, sample_notification
from tests.servers import HttpSink

# Fields whose values are times of the write: compared for presence, not value.
_TIMES = {"created_at", "enqueued_at"}


def _accept(rt: Runtime, payload: dict[str, Any] | None = None) -> tuple[str, str]:
    import json

    payload = payload or sample_notification()
    event_id = payload["metadata"]["eventId"]
    return event_id, rt.intake.accept(event_id, payload["kind"], json.dumps(payload))


def _hash(redis: Redis, key: str) -> dict[str, bytes]:
    return {k.decode(): v for k, v in redis.hgetall(key).items()}


@pytest.mark.parametrize(
    "event_id",
    ["6f1c2a9e-3b7d-4c51-9a0e-2d8f5b7c1e44", 'it\'s "quoted" \\ and ünïcode ✓', "x" * 300],
)
@pytest.mark.parametrize("fast", [True, False])
def test_job_hash_is_what_rq_enqueue_writes(rt: Runtime, redis: Redis, event_id: str, fast: bool) -> None:
    import json

    if not fast:
        from relay.storage.queue import ACCEPT_SCRIPT

        # The fallback (an RQ whose fields relay cannot reproduce): every job built by RQ itself.
        rt.intake.queue.get_redis_server_version()
        rt.intake._script = redis.register_script(ACCEPT_SCRIPT.replace("@JOB@", "unpack(ARGV, 10)"))
        rt.intake._fast = False
    payload = sample_notification()
    payload["metadata"]["eventId"] = event_id
    assert rt.intake.accept(event_id, payload["kind"], json.dumps(payload)) == "accepted"
    ours_id = rt.intake.plan_job(event_id).id
    ours = _hash(redis, f"rq:job:{ours_id}")
    # RQ reads our job back as its own: the same function and arguments.
    restored = Job.fetch(ours_id, connection=redis)
    assert (restored.func_name, restored.args, restored.kwargs) == (PLAN_JOB, (event_id,), {})
    redis.delete(f"rq:job:{ours_id}")
    redis.delete(f"rq:queue:{QUEUE_NAME}")

    # The same job through RQ's public enqueue, as relay did before.
    queue = Queue(QUEUE_NAME, connection=redis)
    queue.enqueue_call(
        PLAN_JOB,
        args=(event_id,),
        job_id=ours_id,
        result_ttl=RESULT_TTL,
        failure_ttl=rt.store.retention,
        timeout=rt.intake.job_timeout,
        retry=CRASH_RETRY,
    )
    theirs = _hash(redis, f"rq:job:{ours_id}")
    assert set(ours) == set(theirs)
    # The call data may be left uncompressed (RQ reads both): compare it as RQ reads it.
    for fields in (ours, theirs):
        fields["data"] = zlib_or_raw(fields["data"])
    assert {k: v for k, v in ours.items() if k not in _TIMES} == {k: v for k, v in theirs.items() if k not in _TIMES}
    assert redis.ttl(f"rq:job:{ours_id}") == -1


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
    assert job.id == rt.intake.plan_job(event_id).id and job.id.startswith(job_id("plan", ""))
    assert job.get_status() == JobStatus.QUEUED
    assert job.func_name == PLAN_JOB and job.args == (event_id,)
    assert job.retries_left == 3 and job.timeout == rt.intake.job_timeout

    # The event, its index entry and its counter went in with the job.
    assert redis.hget(event_key(event_id), "kind") == b"notification:access-control-request-failed"
    assert redis.zscore(EVENTS, event_id) is not None
    assert 0 < redis.ttl(dedup_key(event_id)) <= int(rt.config.dedup_ttl)
    assert 0 < redis.ttl(event_key(event_id)) <= rt.store.retention
    field = metric_field("relay_notifications_received_total", kind="notification:access-control-request-failed")
    assert redis.hget(METRICS, field) == b"1"

    run_worker(rt)
    assert queue.count == 0
    # Done: the job's hash expires within RESULT_TTL seconds (RQ's result_ttl), nothing else of it is left.
    assert 0 < redis.ttl(f"rq:job:{job.id}") <= RESULT_TTL
    assert len(sink.at("/owners")) == 1
    deliveries = rt.store.deliveries(rt.store.event_delivery_ids(event_id))
    assert deliveries and all(d is not None and d.state in {"delivered", "skipped"} for d in deliveries)


def test_a_planning_job_is_written_only_when_none_is_pending(rt: Runtime, redis: Redis) -> None:
    queue = Queue(QUEUE_NAME, connection=redis)
    first, _ = _accept(rt)
    # The flag names the job written with it, and lives a short while (a job lost is seen by the sweep).
    assert redis.get(PENDING) == rt.intake.plan_job(first).id.encode()
    assert 0 < redis.ttl(PENDING) <= PENDING_TTL
    later = [_accept(rt)[0] for _ in range(4)]
    assert queue.job_ids == [rt.intake.plan_job(first).id]
    # Every event waits among the unplanned, at the time it was received, oldest first.
    assert [v.decode() for v in redis.zrange(UNPLANNED, 0, -1)] == [first, *later]
    assert redis.zscore(UNPLANNED, first) == float(redis.hget(event_key(first), "receivedAt") or 0)
    # A planning job starts (clears the flag): the next notification writes a job of its own.
    rt.intake.planning.claim(rt.name, 2, start=True)
    nxt, _ = _accept(rt)
    assert queue.job_ids == [rt.intake.plan_job(first).id, rt.intake.plan_job(nxt).id]
    assert redis.zcard(UNPLANNED) == 4


def test_duplicate_is_counted_and_enqueues_nothing(rt: Runtime, redis: Redis) -> None:
    payload = sample_notification()
    assert _accept(rt, payload)[1] == "accepted"
    assert _accept(rt, payload)[1] == "duplicate"
    assert _accept(rt, payload)[1] == "duplicate"
    assert Queue(QUEUE_NAME, connection=redis).count == 1
    assert redis.zcard(UNPLANNED) == 1
    assert redis.hget(METRICS, metric_field("relay_notifications_duplicate_total")) == b"2"


def test_script_is_loaded_again_after_a_redis_restart(rt: Runtime, redis: Redis) -> None:
    assert _accept(rt)[1] == "accepted"
    redis.script_flush()  # what a restarted server looks like to the client
    assert _accept(rt)[1] == "accepted"
    assert redis.zcard(UNPLANNED) == 2
    assert Queue(QUEUE_NAME, connection=redis).count == 1  # the first one's job plans both


def test_unreachable_redis_is_queue_unavailable_and_writes_nothing(rt: Runtime, redis: Redis, tmp_path: Any) -> None:
    from relay.storage.queue import Intake

    dead = Redis(unix_socket_path=str(tmp_path / "nothing.sock"), socket_connect_timeout=0.5)
    intake = Intake.create(dead, rt.store, rt.config.dedup_ttl)
    with pytest.raises(QueueUnavailable):
        intake.accept("e-1", "notification:x", "{}")
    assert not redis.exists(dedup_key("e-1"))


def test_async_intake_loads_the_script_again_after_a_redis_restart(rt: Runtime, redis: Redis) -> None:
    import asyncio

    from relay.runtime.bootstrap import open_async_redis, redis_url

    async def run() -> list[str]:
        client = open_async_redis(redis_url(rt.config))
        try:
            out = [await rt.intake.accept_async(client, "async-1", "notification:x", "{}")]
            redis.script_flush()  # what a restarted server looks like to the client
            out.append(await rt.intake.accept_async(client, "async-2", "notification:x", "{}"))
            out.append(await rt.intake.accept_async(client, "async-2", "notification:x", "{}"))
            return out
        finally:
            await client.aclose()

    rt.intake.prepare()
    assert asyncio.run(run()) == ["accepted", "accepted", "duplicate"]
    assert redis.zcard(UNPLANNED) == 2
    assert Queue(QUEUE_NAME, connection=redis).count == 1


def test_async_intake_without_redis_is_queue_unavailable(rt: Runtime, tmp_path: Any) -> None:
    import asyncio

    from redis.asyncio import Redis as AsyncRedis

    async def run() -> None:
        dead = AsyncRedis(unix_socket_path=str(tmp_path / "nothing.sock"), socket_connect_timeout=0.5)
        try:
            await rt.intake.accept_async(dead, "async-dead", "notification:x", "{}")
        finally:
            await dead.aclose()

    rt.intake.prepare()
    with pytest.raises(QueueUnavailable):
        asyncio.run(run())


def test_resp_command_is_redis_wire_format() -> None:
    from relay.storage.redis_wire import resp_command

    assert resp_command("SET", "k", b"\x00v\r\n", 7) == b"*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\n\x00v\r\n\r\n$1\r\n7\r\n"
    assert resp_command("ECHO", "ü") == b"*2\r\n$4\r\nECHO\r\n$2\r\n\xc3\xbc\r\n"
