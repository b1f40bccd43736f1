"""Crash and outage safety with real processes: a worker killed mid-send, Redis killed under load."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from redis import Redis
from starlette.testclient import TestClient

from relay.runtime.app import create_app
from relay.runtime.bootstrap import build
from relay.runtime.embedded import EmbeddedRedis
from tests.conftest import base_config, post, run_worker, sample_notification, slow_channel, worker_config_file
from tests.processes import kill
from tests.servers import HttpSink, SmtpSink, wait_for

RELAY = str(Path(sys.executable).parent / "relay")


def test_worker_killed_mid_send_is_retried_and_delivered(
    redis: Redis, redis_server: EmbeddedRedis, sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    config = base_config(sink, smtp, tmp_path, redis_server.url)
    rt = build(config, redis)
    path = worker_config_file(
        tmp_path, redis_server.url, **slow_channel(sink), send_timeout="5s", dead_worker_after="6s"
    )
    sink.delays["/slow"] = 3.0
    payload = sample_notification(messages=[sample_notification()["messages"][0]])
    with TestClient(create_app(rt)) as client:
        assert post(client, payload).status_code == 202

    first = subprocess.Popen(
        [RELAY, "worker", "--config", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for(lambda: "/slow" in sink.started, timeout=20)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    sink.delays.clear()
    second = subprocess.Popen(
        [RELAY, "worker", "--config", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        # The new worker takes the dead one's lease over once it has not beaten for dead_worker_after
        # (6 s here), long before RQ would declare its job abandoned.
        record = wait_for(lambda: _delivered(rt, payload["metadata"]["eventId"]), timeout=120, interval=1)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(30)
    assert record["state"] == "delivered"
    # The killed attempt may have reached the sink (it answers after its delay): at most one more.
    assert 1 <= len(sink.at("/slow")) <= 2


def _delivered(rt: Any, event_id: str) -> dict[str, Any] | None:
    records = [r for r in rt.store.deliveries(rt.store.event_delivery_ids(event_id)) if r]
    if records and all(r.state == "delivered" for r in records):
        return records[0].public()
    return None


def test_redis_killed_under_load_loses_nothing_acknowledged(sink: HttpSink, smtp: SmtpSink, tmp_path: Path) -> None:
    # As `relay serve` runs it (redis.appendfsync: always): with everysec, Redis may answer before it has even
    # written the AOF (while a slow fsync is in progress), and a SIGKILL then loses what it acknowledged.
    server = EmbeddedRedis(tmp_path / "redis", "always").start()
    try:
        conn = Redis.from_url(server.url, socket_timeout=2, socket_connect_timeout=1)
        config = base_config(
            sink, smtp, tmp_path, server.url, routes=[{"channels": ["owners-hook"]}], default={"channels": []}
        )
        rt = build(config, conn)
        acked: list[str] = []
        first: dict[str, Any] = {}
        refused = 0
        stop = threading.Event()
        with TestClient(create_app(rt)) as client:

            def load() -> None:
                nonlocal refused
                while not stop.is_set():
                    payload = sample_notification(messages=[sample_notification()["messages"][0]])
                    answer = post(client, payload)
                    if answer.status_code == 202:
                        acked.append(payload["metadata"]["eventId"])
                        first.setdefault("payload", payload)
                    else:
                        assert answer.status_code == 503 and answer.headers["Retry-After"]
                        refused += 1

            thread = threading.Thread(target=load)
            thread.start()
            wait_for(lambda: len(acked) >= 100, timeout=30)
            kill(server)  # SIGKILL: no chance to flush anything but what the kernel already has
            wait_for(lambda: refused >= 3, timeout=30)
            server.start()
            before = len(acked)
            wait_for(lambda: len(acked) >= before + 50, timeout=30)  # resumes with no restart of relay
            stop.set()
            thread.join(30)
            # Dedup outlives the Redis restart: the first notification again is a duplicate.
            again = post(client, first["payload"])
            assert again.status_code == 202 and again.json()["status"] == "duplicate"
        assert refused >= 3
        missing = [e for e in acked if rt.store.event(e) is None]
        assert missing == []
        run_worker(rt)
        # Each acknowledged notification sent once. A 503 whose accept Redis had made durable just before it was
        # killed (its answer lost with it) is stored and sent too: the platform's retry of it is a duplicate.
        sent = len(sink.at("/owners"))
        assert len(acked) <= sent <= len(acked) + refused
        for event_id in acked:
            [record] = rt.store.deliveries(rt.store.event_delivery_ids(event_id))
            assert record is not None and record.state == "delivered" and record.attempts == 1
    finally:
        server.stop()
