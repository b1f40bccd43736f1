"""Redis Sentinel: relay finds the primary through a real sentinel process the test starts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from relay.config import Config
from relay.runtime.bootstrap import build, open_redis
from tests.conftest import accept
from tests.replicas import RedisGroup


@pytest.fixture
def sentinel_url(tmp_path: Path) -> Iterator[str]:
    group = RedisGroup(tmp_path, replicas=0, sentinels=1).start()
    try:
        yield group.url
    finally:
        group.stop()


def test_sentinel_url_reaches_the_primary(sentinel_url: str) -> None:
    conn = open_redis(sentinel_url, socket_timeout=5)
    conn.set("probe", "1")
    assert conn.get("probe") == b"1"
    rt = build(Config.model_validate({"redis": {"url": sentinel_url}}))
    body = '{"kind":"notification:x","sender":"p","body":{},"messages":[],"metadata":{"eventId":"s1"}}'
    assert accept(rt, "s1", "notification:x", body) == "accepted"
    assert rt.store.event("s1") is not None


def test_sentinel_url_needs_a_service_name() -> None:
    with pytest.raises(ValueError, match="names the service"):
        open_redis("redis+sentinel://127.0.0.1:26379")


def test_webhook_intake_goes_through_the_sentinel_too(sentinel_url: str) -> None:
    from starlette.testclient import TestClient

    from relay.runtime.app import create_app
    from tests.conftest import sample_notification

    rt = build(Config.model_validate({"redis": {"url": sentinel_url}}))
    payload = sample_notification()
    with TestClient(create_app(rt)) as client:
        answer = client.post("/webhook", json=payload)
    assert answer.status_code == 202 and answer.json()["status"] == "accepted"
    assert rt.store.event(payload["metadata"]["eventId"]) is not None
