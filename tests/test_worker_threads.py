"""`relay worker` sends several deliveries at once (SimpleWorker loops in threads) and stops cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from redis import Redis
from rq import Queue, Worker
from starlette.testclient import TestClient

from relay.bootstrap import build, install
from relay.embedded import EmbeddedRedis
from relay.http import create_app
from relay.queue import DELIVER_JOB, QUEUE_NAME
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
