"""`redis.min_replicas`: a 202 only once that many replicas hold the notification (Redis WAIT), else 503 with
Retry-After; the platform's retry (same eventId) is answered 202 only once they do."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis
from starlette.testclient import TestClient

from relay.runtime.app import create_app
from relay.runtime.bootstrap import build
from relay.storage.store import event_key
from tests.conftest import base_config, post, sample_notification
from tests.replicas import RedisGroup
from tests.servers import HttpSink, SmtpSink


@pytest.fixture
def group(tmp_path: Path) -> Iterator[RedisGroup]:
    started = RedisGroup(tmp_path / "redis", replicas=1).start()
    yield started
    started.stop()


def _client(url: str, sink: HttpSink, smtp: SmtpSink, tmp_path: Path) -> TestClient:
    replicas = {"url": url, "min_replicas": 1, "replica_timeout": "200ms"}
    return TestClient(create_app(build(base_config(sink, smtp, tmp_path, url, redis=replicas))))


def test_no_replica_answers_503_quickly_and_the_retry_too(
    redis: Redis, redis_server: object, sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    url = redis_server.url  # type: ignore[attr-defined]
    payload = sample_notification()
    with _client(url, sink, smtp, tmp_path) as client:
        started = time.monotonic()
        first = post(client, payload)
        took = time.monotonic() - started
        again = post(client, payload)
    assert first.status_code == 503 and first.headers["Retry-After"].isdigit()
    assert "replicas" in first.json()["errors"][0]
    assert took < 2.0
    # Half-accepted, as documented: the primary holds it (it is planned and sent), unacknowledged; the retry
    # is not answered 202 either while no replica holds it.
    assert redis.exists(event_key(payload["metadata"]["eventId"]))
    assert again.status_code == 503


def test_202_once_the_replica_holds_it_503_while_it_is_paused(
    group: RedisGroup, sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    ok, paused = sample_notification(), sample_notification()
    with _client(group.url, sink, smtp, tmp_path) as client:
        assert post(client, ok).json()["status"] == "accepted"
        group.pause(group.replica_ports[0])
        try:
            refused = post(client, paused)
            assert refused.status_code == 503 and "Retry-After" in refused.headers
            assert post(client, paused).status_code == 503
        finally:
            group.resume(group.replica_ports[0])
        retried = post(client, paused)
    assert retried.status_code == 202 and retried.json()["status"] == "duplicate"
    replica = Redis(port=group.replica_ports[0])
    assert replica.exists(event_key(ok["metadata"]["eventId"]), event_key(paused["metadata"]["eventId"])) == 2
