"""`relay worker` sends several deliveries at once (SimpleWorker loops in threads) and stops cleanly."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from redis import Redis
from rq import Queue, SimpleWorker, Worker, get_current_job
from rq.registry import FailedJobRegistry, StartedJobRegistry
from starlette.testclient import TestClient

from relay.delivery.jobs import plan_job, prefetch
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime, build, install
from relay.runtime.embedded import EmbeddedRedis
from relay.runtime.worker import ThreadWorker
from relay.storage.queue import DELIVER_JOB, QUEUE_NAME
from relay.storage.store import Store
from tests.conftest import base_config, post, sample_notification, slow_channel, worker_config_file
from tests.servers import HttpSink, SmtpSink, wait_for

RELAY = str(Path(sys.executable).parent / "relay")
DELAY = 1.0


def test_slow_sends_go_out_concurrently_and_sigterm_finishes_them(
    redis: Redis, redis_server: EmbeddedRedis, sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    rt = install(build(base_config(sink, smtp, tmp_path, redis_server.url), redis))
    path = worker_config_file(tmp_path, redis_server.url, **slow_channel(sink), worker_threads=6)
    sink.delays["/slow"] = DELAY
    events = []
    with TestClient(create_app(rt)) as client:
        for _ in range(6):
            payload = sample_notification(messages=[sample_notification()["messages"][0]])
            assert post(client, payload).status_code == 202
            events.append(payload["metadata"]["eventId"])

    proc = subprocess.Popen([RELAY, "worker", "--config", str(path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: len(Worker.all(connection=redis)) == 6, timeout=30)
        # Six sends that each take DELAY seconds are all in flight at once.
        wait_for(lambda: len(sink.started) == 6, timeout=20)
        assert len(sink.at("/slow")) < 3  # one at a time, five would be done by now
        # A stop signal while they are in flight: each thread finishes its delivery, then all exit.
        proc.send_signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        code = proc.wait(30)
        output = proc.stdout.read().decode() if proc.stdout else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, output
    assert time.monotonic() - stopped_at < 15
    assert len(sink.at("/slow")) == 6
    for event_id in events:
        records = [r for r in rt.store.deliveries(rt.store.event_delivery_ids(event_id)) if r]
        assert [r.state for r in records] == ["delivered"]
    assert Worker.all(connection=redis) == []  # every thread registered its death
    assert Queue(QUEUE_NAME, connection=redis).count == 0


def test_idle_worker_stops_promptly(redis: Redis, redis_server: EmbeddedRedis, tmp_path: Path) -> None:
    path = worker_config_file(tmp_path, redis_server.url, worker_threads=4)
    proc = subprocess.Popen(
        [RELAY, "worker", "--config", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    try:
        wait_for(lambda: len(Worker.all(connection=redis)) == 4, timeout=30)
        proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        assert proc.wait(20) == 0
        assert time.monotonic() - started < 8
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert Worker.all(connection=redis) == []


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def test_the_scheduler_runs_in_the_worker_process_and_stops_with_it(
    redis: Redis, redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    path = worker_config_file(tmp_path, redis_server.url, worker_threads=2)
    proc = subprocess.Popen(
        [RELAY, "worker", "--config", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    try:
        wait_for(lambda: len(Worker.all(connection=redis)) == 2, timeout=30)
        # A job due in a second (a retry, say) is moved to the queue by the scheduler and run.
        job = Queue(QUEUE_NAME, connection=redis).enqueue_in(
            timedelta(seconds=1), DELIVER_JOB, "no-such-delivery", result_ttl=0
        )
        assert redis.exists(f"rq:scheduler-lock:{QUEUE_NAME}")
        wait_for(lambda: not redis.exists(job.key), timeout=30)
        assert _children(proc.pid) == []  # no process of its own, so none can be left behind
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # A clean stop releases the scheduler's lock at once (no wait for its expiry on another machine).
    assert not redis.exists(f"rq:scheduler-lock:{QUEUE_NAME}")


_STABLE_FIELDS = ("state", "status", "worker_name", "successful_job_count", "failed_job_count", "job_id", "origin")


def _generic(text: str, worker_name: str) -> str:
    text = text.replace(worker_name, "WORKER")
    return re.sub(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}", "ID", text)


def _rq_state(redis: Redis, worker_name: str) -> dict[str, object]:
    """RQ's keys (ids and the worker's name made generic): for each, its type, whether it expires, and
    what it holds that does not vary from run to run (hash fields, set members, sizes)."""
    state: dict[str, object] = {}
    for raw in sorted(redis.keys("rq:*")):
        key = _generic(raw.decode(), worker_name)
        kind = redis.type(raw).decode()
        held: object
        if kind == "hash":
            fields = {k.decode(): v.decode(errors="replace") for k, v in redis.hgetall(raw).items()}
            held = (sorted(fields), {f: _generic(fields[f], worker_name) for f in _STABLE_FIELDS if f in fields})
        elif kind == "set":
            held = sorted(_generic(m.decode(), worker_name) for m in redis.smembers(raw))
        elif kind == "zset":
            held = sorted(_generic(m.decode(), worker_name) for m in redis.zrange(raw, 0, -1))
        elif kind == "list":
            held = redis.llen(raw)
        else:
            held = None
        state[key] = (kind, "expires" if redis.ttl(raw) >= 0 else "persists", held)
    return state


MID_JOB: list[dict[str, object]] = []


def snapshot_job() -> None:
    """A job that records RQ's keys while it runs (its worker has started it)."""
    job = get_current_job()
    assert job is not None and job.worker_name
    MID_JOB.append(_rq_state(job.connection, job.worker_name))


def test_a_relay_job_runs_with_the_same_keys_as_under_rqs_own_start(
    redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What relay's worker writes to start a job (one script) is what RQ's two pipelines write."""
    monkeypatch.setattr("relay.runtime.lean_jobs.RELAY_JOBS", frozenset({f"{__name__}.snapshot_job"}))
    MID_JOB.clear()
    for worker_class in (SimpleWorker, ThreadWorker):
        redis.flushdb()
        queue = Queue(QUEUE_NAME, connection=redis)
        queue.enqueue(snapshot_job, result_ttl=0, job_timeout=30, ttl=600)  # a job that would expire unstarted
        worker = worker_class([queue], connection=redis, name=f"start-{worker_class.__name__}")
        worker.register_birth()
        found = worker.dequeue_job_and_maintain_ttl(None)
        assert found is not None
        worker.execute_job(*found)
        worker.register_death()
    rq_own, relays = MID_JOB
    assert any(key.startswith("rq:execution:") for key in rq_own)  # the snapshot saw a started job
    assert relays == rq_own


@pytest.mark.parametrize("jobs", [1, 5])
def test_relay_jobs_leave_redis_as_rqs_own_success_handling_does(
    redis: Redis, redis_server: EmbeddedRedis, sink: HttpSink, smtp: SmtpSink, tmp_path: Path, jobs: int
) -> None:
    """relay's worker starts and ends its own jobs in one round trip each (`ThreadWorker.execute_job`):
    what it leaves in Redis must be what RQ's SimpleWorker leaves, job for job."""
    seen = {}
    for worker_class in (SimpleWorker, ThreadWorker):
        redis.flushdb()
        rt = install(build(base_config(sink, smtp, tmp_path, redis_server.url), redis))
        with TestClient(create_app(rt)) as client:
            for _ in range(jobs):
                assert post(client, sample_notification()).status_code == 202
        queue = Queue(QUEUE_NAME, connection=redis)
        # A delivery job too (the other job of relay's), for a delivery that is already gone.
        queue.enqueue(DELIVER_JOB, "no-such-delivery", result_ttl=0)
        worker = worker_class([queue], connection=redis, name=f"lean-{worker_class.__name__}")
        worker.register_birth()
        # RQ's work loop, one job at a time, looked at while the worker lives (its death clears its keys).
        while (found := worker.dequeue_job_and_maintain_ttl(None)) is not None:
            worker.execute_job(*found)
        seen[worker_class.__name__] = _rq_state(redis, worker.name)
        worker.register_death()
        assert not redis.keys("rq:job:*") and not redis.keys("rq:execution*")
    assert seen["ThreadWorker"] == seen["SimpleWorker"]
    _, _, (_, worker_fields) = seen["ThreadWorker"]["rq:worker:WORKER"]  # type: ignore[misc]
    assert worker_fields["successful_job_count"] == str(jobs + 1)


def test_a_relay_job_that_raises_takes_rqs_failure_path(redis: Redis, rt: Runtime) -> None:
    queue = Queue(QUEUE_NAME, connection=redis)
    # deliver_job with no arguments raises TypeError: RQ's own failure handling records it.
    job = queue.enqueue(DELIVER_JOB, result_ttl=0, failure_ttl=60)
    worker = ThreadWorker([queue], connection=redis)
    worker.work(burst=True)
    job.refresh()
    assert job.get_status() == "failed"
    assert "TypeError" in (job.latest_result().exc_string or "")  # type: ignore[union-attr]
    assert job.id in FailedJobRegistry(QUEUE_NAME, connection=redis)
    assert StartedJobRegistry(QUEUE_NAME, connection=redis).count == 0
    assert not redis.keys("rq:execution:*")


def spin(seconds: float) -> None:
    """A job busy in Python for `seconds` (a timeout, raised between bytecodes, cannot cut one C call)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.05)


def test_a_job_over_its_timeout_is_stopped_and_recorded_as_rq_does(redis: Redis) -> None:
    queue = Queue(QUEUE_NAME, connection=redis)
    job = queue.enqueue(spin, 30, job_timeout=1, result_ttl=0, failure_ttl=60)
    started = time.monotonic()
    ThreadWorker([queue], connection=redis).work(burst=True)
    assert time.monotonic() - started < 10
    job.refresh()
    assert job.get_status() == "failed"
    assert "Task exceeded maximum timeout value (1 seconds)" in (job.latest_result().exc_string or "")  # type: ignore[union-attr]


@pytest.mark.parametrize(("worker_class", "reads"), [(ThreadWorker, 0), (SimpleWorker, 1)])
def test_a_planning_job_gets_its_event_with_its_start(
    redis: Redis, rt: Runtime, sink: HttpSink, monkeypatch: pytest.MonkeyPatch, worker_class: type, reads: int
) -> None:
    """relay's worker reads a planning job's event in the pipeline that starts the job; RQ's own worker
    leaves the job to read it. Either way the notification is delivered."""
    calls: list[str] = []
    original = Store.event
    monkeypatch.setattr(Store, "event", lambda self, event_id: calls.append(event_id) or original(self, event_id))
    payload = sample_notification()
    with TestClient(create_app(rt)) as client:
        assert post(client, payload).status_code == 202
    worker_class([Queue(QUEUE_NAME, connection=redis)], connection=redis).work(burst=True)
    assert len(calls) == reads
    records = [r for r in rt.store.deliveries(rt.store.event_delivery_ids(payload["metadata"]["eventId"])) if r]
    assert records and {r.state for r in records} <= {"delivered", "skipped"}
    assert "delivered" in {r.state for r in records}


def test_an_event_read_for_another_job_is_not_used(rt: Runtime) -> None:
    prefetch("some-other-event", None)
    assert plan_job("no-such-event") == 0  # looked up itself: not there
    prefetch("gone-event", None)
    assert plan_job("gone-event") == 0  # the read said there is none
