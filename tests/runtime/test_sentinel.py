"""Redis Sentinel: relay finds the primary through a real sentinel process the test starts."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis

from relay.config import Config
from relay.runtime.bootstrap import build, open_redis
from relay.runtime.embedded import redis_executable
from tests.servers import free_port, wait_for


@pytest.fixture
def sentinel_url(tmp_path: Path) -> Iterator[str]:
    exe = redis_executable()
    primary_port, sentinel_port = free_port(), free_port()
    procs = [
        subprocess.Popen(
            [exe, "--port", str(primary_port), "--bind", "127.0.0.1", "--save", "", "--dir", str(tmp_path)],
            stdout=subprocess.DEVNULL,
        )
    ]
    conf = tmp_path / "sentinel.conf"
    conf.write_text(
        f"port {sentinel_port}\nbind 127.0.0.1\ndir {tmp_path}\nsentinel monitor relaymain 127.0.0.1 {primary_port} 1\n"
    )
    procs.append(subprocess.Popen([exe, str(conf), "--sentinel"], stdout=subprocess.DEVNULL))
    try:

        def up() -> bool:
            try:
                return bool(Redis(port=sentinel_port, socket_timeout=1).ping())
            except Exception:
                return False

        wait_for(up, timeout=10)
        yield f"redis+sentinel://127.0.0.1:{sentinel_port}/relaymain/0"
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


def test_sentinel_url_reaches_the_primary(sentinel_url: str) -> None:
    conn = open_redis(sentinel_url, socket_timeout=5)
    conn.set("relay:probe", "1")
    assert conn.get("relay:probe") == b"1"
    rt = build(Config.model_validate({"redis": {"url": sentinel_url}}))
    body = '{"kind":"notification:x","sender":"p","body":{},"messages":[],"metadata":{"eventId":"s1"}}'
    assert rt.intake.accept("s1", "notification:x", body) == "accepted"
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
