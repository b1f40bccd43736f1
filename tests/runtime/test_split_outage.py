"""A channel that is down for a while, on real clocks, through `relay api` and `relay worker` apart on the
test's Redis: after two failures in a row its deliveries wait (held, no attempt spent), a probe a second
later finds it still down, the next finds it up, and everything goes out once, none `failed`."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from relay.runtime.bootstrap import Runtime
from tests.conftest import WEBHOOK_TOKEN, sample_notification
from tests.processes import stop
from tests.runtime.test_serve import RELAY
from tests.servers import HttpSink, free_port, http_get, wait_for

ADMIN = "split-admin-5678"


def _post(base: str, payload: dict[str, Any]) -> None:
    request = urllib.request.Request(base + "/webhook", json.dumps(payload).encode(), method="POST")
    request.add_header("Authorization", f"Bearer {WEBHOOK_TOKEN}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 202


def _admin(base: str, path: str) -> Any:
    code, text = http_get(base + path, ADMIN)
    assert code == 200, text
    return json.loads(text)


@pytest.mark.slow
def test_a_channel_down_for_a_while_loses_nothing_and_sends_each_once(
    make_runtime: Callable[..., Runtime], sink: HttpSink, tmp_path: Path
) -> None:
    port = free_port()
    rt = make_runtime(
        server={"port": port, "auth": {"tokens": [WEBHOOK_TOKEN]}, "admin_tokens": [ADMIN]},
        channels={"hook": {"url": sink.url("/hook"), "outage": {"after": 2, "probe": "1s"}}},
        routes=[{"channels": ["hook"]}],
        default={"channels": []},
        worker_threads=1,  # one send at a time: the two failures in a row come first
    )
    path = tmp_path / "split.json"
    path.write_text(json.dumps(rt.config.model_dump(mode="json", by_alias=True, exclude={"base_dir"})))
    base = f"http://127.0.0.1:{port}"
    sink.script["/hook"] = [503] * 3  # two sends, then the first probe: 503; the next probe gets 200
    procs = [
        subprocess.Popen([RELAY, role, "--config", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for role in ("api", "worker")
    ]
    try:
        wait_for(lambda: http_get(base + "/readyz")[0] == 200, timeout=30)  # the worker beats too
        events = [sample_notification(), sample_notification()]
        for payload in events:
            _post(base, payload)
        # Down, and what came due waits with the reason instead of spending its attempts.
        wait_for(lambda: _admin(base, "/api/v1/channels")["channels"][0]["state"] == "down", timeout=20)
        [hook] = _admin(base, "/api/v1/channels")["channels"]
        assert hook["name"] == "hook" and hook["since"] and "503" in hook["lastError"]

        def states() -> list[str]:
            return [
                d["state"]
                for e in events
                for d in _admin(base, f"/api/v1/events/{e['metadata']['eventId']}")["deliveries"]
            ]

        wait_for(lambda: "held" in states(), timeout=20)
        # Up again at a probe: every delivery sent once, none failed, none left waiting.
        wait_for(lambda: set(states()) == {"delivered"}, timeout=30, interval=0.2)
        assert len(states()) == 6 and len(sink.at("/hook")) == 6  # 3 messages x 2 notifications, each once
        assert _admin(base, "/api/v1/channels")["channels"][0]["state"] == "up"
        assert _admin(base, "/api/v1/deliveries?state=failed") == []
    finally:
        for proc in procs:
            stop(proc)
