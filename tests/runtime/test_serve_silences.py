"""Silences on real clocks through `relay serve` (embedded Redis, API, workers, RQ's scheduler): a delivery a
silence holds goes out once the silence ends, by itself; one a silence that is expired early held goes out
at once; a skipped one never does."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from relay.runtime.bootstrap import Runtime
from tests.conftest import WEBHOOK_TOKEN, sample_notification
from tests.processes import stop
from tests.runtime.test_serve import RELAY  # the fixture: `relay serve` on a free port
from tests.runtime.test_serve import served as served
from tests.servers import HttpSink, free_port, http_get, wait_for

ADMIN = "serve-admin-5678"


def _call(base: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {ADMIN}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.status, json.loads(answer.read())


def _owners_state(base: str, event_id: str) -> tuple[str, str | None]:
    code, text = http_get(f"{base}/api/v1/events/{event_id}", ADMIN)
    assert code == 200
    [owners] = [d for d in json.loads(text)["deliveries"] if d["channel"] == "owners" and d["recipientType"]][:1]
    return owners["state"], owners["lastError"]


def _send(config: str, tmp_path: Path) -> str:
    payload = sample_notification()
    path = tmp_path / f"{payload['metadata']['eventId']}.json"
    path.write_text(json.dumps(payload))
    sent = subprocess.run([RELAY, "send", str(path), "--config", config], capture_output=True, text=True, timeout=30)
    assert sent.returncode == 0 and sent.stdout.startswith("202"), sent.stderr
    return str(payload["metadata"]["eventId"])


@pytest.mark.slow
def test_held_until_the_silence_ends_expired_early_released_skipped_never(
    served: dict[str, object], sink: HttpSink, tmp_path: Path
) -> None:
    base, config = str(served["base"]), str(served["config"])
    body = {"matchers": ['channel="owners"'], "createdBy": "ops", "comment": "deploy"}
    # Long enough for a loaded machine to plan within it (planned after its end, nothing would be held).
    status, silence = _call(base, "POST", "/api/v1/silences", {**body, "duration": "20s"})
    assert status == 201 and silence["state"] == "active"
    ends = time.time() + 20
    event_id = _send(config, tmp_path)
    wait_for(lambda: _owners_state(base, event_id)[0] == "held", timeout=15)
    assert _owners_state(base, event_id)[1] == f"silenced by {silence['id']} (ops): deploy"
    assert sink.at("/serve-owners") == []
    # Nothing else to do: its wake-up at the silence's end sends it, once.
    wait_for(lambda: len(sink.at("/serve-owners")) == 2, timeout=40)
    assert time.time() >= ends - 0.5
    # Recorded once the sink has answered: the sink sees the post a moment before the record says so.
    wait_for(lambda: _owners_state(base, event_id)[0] == "delivered", timeout=10)

    # A long silence, expired early through the command line: what it held goes out at once.
    sink.clear()
    status, long = _call(base, "POST", "/api/v1/silences", {**body, "duration": "2h"})
    event_id = _send(config, tmp_path)
    wait_for(lambda: _owners_state(base, event_id)[0] == "held", timeout=15)
    expired = subprocess.run(
        [RELAY, "silence", "expire", long["id"], "--config", config], capture_output=True, text=True, timeout=30
    )
    assert expired.returncode == 0 and "2 held deliveries go out now" in expired.stdout, expired.stderr
    wait_for(lambda: len(sink.at("/serve-owners")) == 2, timeout=10)

    # A skip: skipped at once, never sent.
    sink.clear()
    status, skip = _call(base, "POST", "/api/v1/silences", {**body, "duration": "2h", "action": "skip"})
    event_id = _send(config, tmp_path)
    wait_for(lambda: _owners_state(base, event_id)[0] == "skipped", timeout=15)
    assert _owners_state(base, event_id)[1] == f"silenced by {skip['id']}: deploy"

    # The workers count in relay serve's hash: serve's /metrics shows them (docs/fleet.md).
    def skips_counted() -> str | None:
        text = http_get(f"{base}/metrics")[1]
        return text if 'relay_silenced_total{action="skip"} 2.0' in text.splitlines() else None

    metrics = wait_for(skips_counted, timeout=5)
    assert 'relay_silenced_total{action="skip"} 2.0' in metrics.splitlines()
    assert "relay_silences_active 1.0" in metrics.splitlines()
    assert sink.at("/serve-owners") == []


@pytest.mark.slow
def test_through_relay_api_and_relay_worker_on_an_external_redis(
    make_runtime: Callable[..., Runtime], sink: HttpSink, tmp_path: Path
) -> None:
    """The API that stores the silence and the worker that obeys it are two processes on one Redis (the
    test's, outside both): the worker sees the silence at once and sends what it held when it ends."""
    port = free_port()
    rt = make_runtime(server={"port": port, "auth": {"tokens": [WEBHOOK_TOKEN]}, "admin_tokens": [ADMIN]})
    path = tmp_path / "split.json"
    path.write_text(json.dumps(rt.config.model_dump(mode="json", by_alias=True, exclude={"base_dir"})))
    base = f"http://127.0.0.1:{port}"
    procs = [
        subprocess.Popen([RELAY, role, "--config", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for role in ("api", "worker")
    ]
    try:
        wait_for(lambda: http_get(base + "/readyz")[0] == 200, timeout=30)  # the worker beats too
        body = {"matchers": ['channel="owners-hook"'], "createdBy": "ops", "comment": "split", "duration": "5s"}
        status, silence = _call(base, "POST", "/api/v1/silences", body)
        assert status == 201 and silence["state"] == "active"
        ends = time.time() + 5
        payload = sample_notification()
        request = urllib.request.Request(base + "/webhook", json.dumps(payload).encode(), method="POST")
        request.add_header("Authorization", f"Bearer {WEBHOOK_TOKEN}")
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 202
        event_id = payload["metadata"]["eventId"]
        wait_for(lambda: _state(base, event_id) == "held", timeout=15)
        wait_for(lambda: len(sink.at("/managers")) == 1, timeout=10)  # what no silence matches goes at once
        assert sink.at("/owners") == []
        wait_for(lambda: _state(base, event_id) == "delivered", timeout=25)
        assert time.time() >= ends - 0.5 and len(sink.at("/owners")) == 1
    finally:
        for proc in procs:
            stop(proc)


def _state(base: str, event_id: str) -> str | None:
    code, text = http_get(f"{base}/api/v1/events/{event_id}", ADMIN)
    if code != 200:
        return None
    return next((d["state"] for d in json.loads(text)["deliveries"] if d["channel"] == "owners-hook"), None)
