"""`relay serve` as a subprocess: a stream of wrong credentials is answered 429 after the limit on each
surface, a right credential too while it lasts (and X-Forwarded-For from an untrusted peer changes
nothing), and once the window has passed the right one is let in."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import sample_notification
from tests.processes import stop
from tests.servers import free_port, wait_for

RELAY = str(Path(sys.executable).parent / "relay")
TOKEN = "serve-webhook-token-0123456789"
ADMIN = "serve-admin-token-0123456789"
LIMIT = 3
WINDOW = 5.0  # long enough for the calls below on a loaded machine; waited for once, at the end


def call(
    url: str, token: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        url,
        data=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, {k.lower(): v for k, v in answer.headers.items()}, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()
    except OSError:  # not listening yet
        return 0, {}, b""


@pytest.fixture
def base(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    config = {
        "server": {
            "port": port,
            "auth": {"tokens": [TOKEN]},
            "admin_tokens": [ADMIN],
            "auth_failures": {"limit": LIMIT, "window": f"{WINDOW:g}s"},
        },
        "data_dir": str(tmp_path / "data"),
    }
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))
    proc = subprocess.Popen(
        [RELAY, "serve", "--config", str(path), "--workers", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: call(url + "/healthz", "")[0] == 200, timeout=30)
        yield url
    finally:
        stop(proc)


def test_wrong_credentials_are_throttled_on_every_surface_of_relay_serve(base: str) -> None:
    webhook = base + "/webhook"
    api = base + "/api/v1/deliveries"
    payload = json.dumps(sample_notification()).encode()
    for _ in range(LIMIT):
        assert call(webhook, "wrong", payload)[0] == 401
        assert call(api, "wrong")[0] == 401
    refused_by = time.monotonic()  # every refusal so far came before this
    status, headers, body = call(webhook, TOKEN, payload)
    assert status == 429 and 1 <= int(headers["retry-after"]) <= WINDOW
    assert json.loads(body)["userMessage"] == "Too many failed attempts: wait before trying again."
    assert call(api, ADMIN)[0] == 429
    # uvicorn is told not to read X-Forwarded-For: a client cannot name itself someone else.
    assert call(api, ADMIN, headers={"X-Forwarded-For": "198.51.100.7"})[0] == 429

    login = urllib.request.Request(base + "/ui/login", data=b"token=wrong", method="POST")
    for _ in range(LIMIT + 1):
        try:
            urllib.request.urlopen(login, timeout=10)
        except urllib.error.HTTPError as exc:
            last = exc.code
    assert last == 429

    # The window passes: the right credentials are let in again.
    time.sleep(max(0.0, refused_by + WINDOW - time.monotonic()) + 0.2)
    assert call(webhook, TOKEN, payload)[0] == 202
    assert call(api, ADMIN)[0] == 200
    metrics = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    assert f'relay_auth_failures_total{{endpoint="webhook"}} {LIMIT}.0' in metrics
    assert f'relay_auth_failures_total{{endpoint="ui"}} {LIMIT}.0' in metrics
    assert "relay_auth_throttled_total 4.0" in metrics
