"""`relay worker`: one RQ worker per process, its senders, RQ's scheduler forked by one of them, leases swept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from redis import Redis
from rq import Queue, Worker
from rq.scheduler import RQScheduler
from starlette.testclient import TestClient

from relay.config import DEAD_WORKER_AFTER as ORPHAN_GRACE
from relay.core.model import State
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime, build
from relay.runtime.embedded import EmbeddedRedis
from relay.runtime.worker import MAINTENANCE_INTERVAL, Sweep, sweep
from relay.storage.leases import LEASES, MAX_LOSSES, READY, orphaned, split_unit
from relay.storage.records import WORKERS
from relay.storage.work_queue import QUEUE_NAME, WORK_JOB
from tests.conftest import base_config, post, run_worker, sample_notification, slow_channel, worker_config_file
from tests.processes import children, running
from tests.servers import HttpSink, SmtpSink, wait_for

RELAY = str(Path(sys.executable).parent / "relay")
DELAY = 1.0


def test_slow_sends_go_out_side_by_side_and_sigterm_finishes_them(
    redis: Redis, redis_server: EmbeddedRedis, sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    rt = build(base_config(sink, smtp, tmp_path, redis_server.url), redis)
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
        # One RQ worker for one process, whatever its sender threads: what `rq info` counts.
        wait_for(lambda: len(Worker.all(connection=redis)) == 1, timeout=30)
        # Six sends that each take DELAY seconds are all in flight at once.
        wait_for(lambda: len(sink.started) == 6, timeout=20)
        assert len(sink.at("/slow")) < 3  # one at a time, five would be done by now
        # A stop signal while they are in flight: the senders finish them, then the process exits.
        proc.send_signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        code = proc.wait(30)
        output = proc.stdout.read().decode() if proc.stdout else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, output
    assert "cold shut down" not in output
    assert time.monotonic() - stopped_at < 15
    assert len(sink.at("/slow")) == 6
    for event_id in events:
        records = [r for r in rt.store.deliveries(rt.store.event_delivery_ids(event_id)) if r]
        assert [r.state for r in records] == ["delivered"]
    assert Worker.all(connection=redis) == []
    assert Queue(QUEUE_NAME, connection=redis).count == 0
    assert redis.hlen(LEASES) == 0
    # A clean stop lets go of the scheduler's lock at once, for another worker to take.
    assert not redis.exists(RQScheduler.get_locking_key(QUEUE_NAME))


def test_idle_worker_stops_promptly(redis: Redis, redis_server: EmbeddedRedis, tmp_path: Path) -> None:
    path = worker_config_file(tmp_path, redis_server.url, worker_threads=4)
    proc = subprocess.Popen(
        [RELAY, "worker", "--config", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    try:
        # Idle: RQ registers a worker a moment before it installs its signal handlers; once it waits for
        # jobs, they are in place.
        wait_for(lambda: [w.get_state() for w in Worker.all(connection=redis)] == ["idle"], timeout=30)
        wait_for(lambda: redis.zcard(WORKERS) == 1, timeout=10)  # its beat: /readyz counts it
        proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        assert proc.wait(20) == 0
        assert time.monotonic() - started < 8
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert Worker.all(connection=redis) == []
    assert redis.zcard(WORKERS) == 0  # stopped, it is no longer counted as a live worker


def _scheduled_job_runs(redis: Redis, timeout: float) -> float:
    """Schedule a job due in a second (any job will do: a wake-up with no work due) and wait until a worker has run it,
    which only happens once a scheduler has moved it to the queue; returns how long that took."""
    started = time.monotonic()
    job = Queue(QUEUE_NAME, connection=redis).enqueue_in(timedelta(seconds=1), WORK_JOB, result_ttl=60)
    wait_for(lambda: job.get_status() == "finished", timeout=timeout, interval=0.1)
    return time.monotonic() - started


@pytest.mark.slow  # started first: its waiting on the real clock overlaps the run
def test_one_worker_forks_rqs_scheduler_and_when_it_is_killed_another_takes_over(
    redis: Redis, redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    path = worker_config_file(tmp_path, redis_server.url, worker_threads=1)
    procs = [subprocess.Popen([RELAY, "worker", "--config", str(path)], stdout=subprocess.DEVNULL) for _ in range(2)]
    lock = RQScheduler.get_locking_key(QUEUE_NAME)
    try:
        # Both idle: each has been through its first try at the lock; the one that took it forked a scheduler.
        wait_for(lambda: [w.get_state() for w in Worker.all(connection=redis)] == ["idle"] * 2, timeout=30)
        wait_for(lambda: [p for p in procs if children(p.pid)], timeout=10)
        [holder] = [p for p in procs if children(p.pid)]
        [other] = [p for p in procs if p is not holder]
        [scheduler] = children(holder.pid)
        holding = redis.get(lock)
        assert holding is not None
        assert _scheduled_job_runs(redis, timeout=10) < 5

        os.kill(holder.pid, signal.SIGKILL)  # what the OOM killer does
        holder.wait(10)
        killed = time.monotonic()
        # Its scheduler got SIGTERM from the kernel: it stops, letting go of RQ's lock.
        wait_for(lambda: not running(scheduler), timeout=5)
        assert redis.get(lock) != holding
        # The other worker takes the lock at its next maintenance pass and forks its own scheduler.
        took = _scheduled_job_runs(redis, timeout=2 * MAINTENANCE_INTERVAL + 10)
        print(f"a scheduled job ran {time.monotonic() - killed:.1f} s after the scheduler's worker was killed")
        assert took < 2 * MAINTENANCE_INTERVAL
        assert len(children(other.pid)) == 1 and redis.get(lock) not in (None, holding)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(30)
    assert not redis.exists(lock)  # a clean stop lets go of it


# --- leases ------------------------------------------------------------------------------------


def test_orphaned_leases_are_those_of_workers_not_seen_within_the_grace() -> None:
    leases = {"d:1": "alive", "d:2": "dead", "e:3": "dead", "d:4": "never-seen"}
    beats = {"alive": 100.0, "dead": 100.0 - ORPHAN_GRACE - 1}
    first_seen: dict[str, float] = {}
    found = orphaned(leases, beats, now=100.0 + 1, grace=ORPHAN_GRACE, first_seen=first_seen)
    # An owner that never beat (killed before its first beat, or an API process's release) is timed from when
    # a sweep first saw it: not dead at first sight.
    assert found == {"dead": ["d:2", "e:3"]} and first_seen == {"never-seen": 101.0}
    later = orphaned(
        leases, beats | {"alive": 150.0}, now=101.0 + ORPHAN_GRACE + 1, grace=ORPHAN_GRACE, first_seen=first_seen
    )
    assert later == {"dead": ["d:2", "e:3"], "never-seen": ["d:4"]}
    assert orphaned(leases, {"alive": 100, "dead": 100, "never-seen": 100}, 100.0, ORPHAN_GRACE, {}) == {}
    orphaned({"d:1": "alive"}, beats, 100.0, ORPHAN_GRACE, first_seen)
    assert first_seen == {}  # forgotten once it holds nothing


def _leased_to_a_dead_worker(client: TestClient, rt: Runtime, redis: Redis) -> list[str]:
    """A notification planned by a worker that then died: its records stored, leased, never sent."""
    from tests.conftest import plan_job

    payload = sample_notification()
    assert post(client, payload).status_code == 202
    event_id = payload["metadata"]["eventId"]
    queue = Queue(QUEUE_NAME, connection=redis)
    queue.empty()
    rt.store.owner = "relay-dead-worker"
    sent: list[object] = []
    rt.sender.submit = lambda task, name="": sent.append(task)  # type: ignore[method-assign]
    try:
        plan_job(rt, event_id)
    finally:
        del rt.sender.submit
        rt.store.owner = "relay-this-test"
    assert sent
    rt.store.heartbeat("relay-dead-worker")
    rt.clock.advance(ORPHAN_GRACE + 5)  # its last beat
    return [split_unit(u)[1] for u, owner in rt.store.leases.held().items() if owner == "relay-dead-worker"]


def test_deliveries_of_a_dead_worker_are_queued_again_and_delivered_once(
    client: TestClient, rt: Runtime, redis: Redis, sink: HttpSink
) -> None:
    leased = _leased_to_a_dead_worker(client, rt, redis)
    assert leased and not sink.hits
    assert sweep(rt, rt.clock()) == len(leased)
    assert redis.hlen(LEASES) == 0 and redis.zcard(READY) == len(leased)
    run_worker(rt)
    records = [r for r in rt.store.deliveries(leased) if r is not None]
    assert [r.state for r in records] == [State.DELIVERED.value] * len(leased)
    hooks = [r for r in records if r.channel.endswith("-hook")]
    assert len(sink.hits) == len(hooks) > 0
    assert sweep(rt, rt.clock()) == 0  # nothing left to take over, nothing sent twice
    run_worker(rt)
    assert len(sink.hits) == len(hooks)


def test_a_live_workers_leases_are_left_alone(client: TestClient, rt: Runtime, redis: Redis) -> None:
    leased = _leased_to_a_dead_worker(client, rt, redis)
    rt.store.heartbeat("relay-dead-worker")  # it beats after all
    assert sweep(rt, rt.clock()) == 0
    assert {f"d:{i}" for i in leased} <= set(rt.store.leases.held())


def test_a_delivery_whose_worker_keeps_dying_is_failed_not_sent_again(
    client: TestClient, rt: Runtime, redis: Redis
) -> None:
    from relay.storage.leases import LOSSES

    leased = _leased_to_a_dead_worker(client, rt, redis)
    for ident in leased:
        redis.hset(LOSSES, f"d:{ident}", MAX_LOSSES - 1)
    sweep(rt, rt.clock())
    for record in rt.store.deliveries(leased):
        assert record is not None and record.state == State.FAILED.value
        assert record.lastError is not None and "its worker died holding it" in record.lastError
    assert redis.zcard(READY) == 0  # not due again


def test_a_lease_of_this_worker_with_no_send_in_hand_is_queued_again_at_the_second_look(
    client: TestClient, rt: Runtime, redis: Redis, sink: HttpSink
) -> None:
    """A send whose outcome could not be stored (Redis away a moment) leaves its lease behind, with no task
    in hand: the worker's own sweep queues it again, once seen so twice (a lease taken a moment before its
    task is handed over is never seen so twice)."""
    payload = sample_notification(messages=[sample_notification()["messages"][0]])
    assert post(client, payload).status_code == 202
    Queue(QUEUE_NAME, connection=redis).empty()
    records = [r for r in rt.store.deliveries(rt.store.event_delivery_ids(payload["metadata"]["eventId"])) if r]
    assert not records  # not planned yet: plan it by hand, as a worker would, then lose its task
    from tests.conftest import plan_job

    lost: list[object] = []
    rt.sender.submit = lambda task, name="": lost.append(task)  # type: ignore[method-assign]
    try:
        plan_job(rt, payload["metadata"]["eventId"])
    finally:
        del rt.sender.submit
    leased = [split_unit(u)[1] for u, owner in rt.store.leases.held().items() if owner == rt.name]
    assert leased and lost
    seen = Sweep()
    assert sweep(rt, rt.clock(), seen) == 0
    assert seen.suspects == {f"d:{i}" for i in leased} and redis.zcard(READY) == 0  # only suspected
    assert sweep(rt, rt.clock(), seen) == len(leased) and seen.suspects == set()
    assert Queue(QUEUE_NAME, connection=redis).count == 1 and redis.zcard(READY) == len(leased)
    assert redis.hlen(LEASES) == 0
    run_worker(rt)
    assert [r.state for r in rt.store.deliveries(leased) if r] == ["delivered"] * len(leased)


def test_dead_worker_after_is_a_setting_and_the_beat_keeps_within_it() -> None:
    from relay.config import Config
    from relay.storage.generations import HEARTBEAT_SECONDS, heartbeat_seconds

    assert Config().dead_worker_after == 45.0  # a stall of a dozen seconds, or thirty, is not a death
    assert heartbeat_seconds(Config()) == HEARTBEAT_SECONDS
    short = Config.model_validate({"dead_worker_after": "6s"})
    assert short.dead_worker_after == 6.0 and heartbeat_seconds(short) == 1.5  # four beats within it
    with pytest.raises(ValueError):
        Config.model_validate({"dead_worker_after": "0.5s"})
