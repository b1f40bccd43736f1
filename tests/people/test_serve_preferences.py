"""Black box, through `relay serve` as the README runs it (embedded Redis, two worker processes) with a real
SMTP server: the one-click unsubscribe link of a real e-mail, POSTed over HTTP, makes the next notification's
e-mail skipped, with its reason and counted, with no restart; the preference survives a restart of relay and
its Redis."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from tests.conftest import sample_notification
from tests.processes import stop
from tests.servers import HttpSink, SmtpSink, free_port, wait_for

RELAY = str(Path(sys.executable).parent / "relay")
TOKEN = "serve-token-1234"
ADMIN = "serve-admin-5678"
ALICE = "user:default/alice.rossi"


def _call(
    url: str, data: bytes | None = None, headers: dict[str, str] | None = None, method: str | None = None
) -> tuple[int, str, Any]:
    request = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode(), answer.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers
    except OSError:
        return 0, "", {}


@contextmanager
def _serve(config: Path, base: str) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [RELAY, "serve", "--config", str(config), "--workers", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=config.parent,
    )
    try:
        wait_for(lambda: _call(base + "/readyz")[0] == 200, timeout=30)
        yield proc
    finally:
        stop(proc)


def _post(base: str) -> str:
    payload = sample_notification()
    status, _, _ = _call(
        base + "/webhook",
        json.dumps(payload).encode(),
        {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    assert status == 202
    return str(payload["metadata"]["eventId"])


def _admin(base: str, path: str) -> Any:
    status, body, _ = _call(base + path, headers={"Authorization": f"Bearer {ADMIN}"})
    return json.loads(body) if status == 200 else None


def _email_state(base: str, event_id: str) -> tuple[str, str] | None:
    event = _admin(base, f"/api/v1/events/{event_id}")
    found = [d for d in (event or {}).get("deliveries", []) if d["channel"] == "email"]
    return (found[0]["state"], found[0]["lastError"]) if found and found[0]["state"] != "queued" else None


def test_one_click_through_relay_serve_holds_across_a_restart(tmp_path: Path, sink: HttpSink, smtp: SmtpSink) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    config = tmp_path / "config.yaml"
    config.write_text(
        json.dumps(
            {
                "server": {"port": port, "auth": {"tokens": [TOKEN]}, "admin_tokens": [ADMIN]},
                "data_dir": str(tmp_path / "data"),
                "templates": {"builtin": True},
                "channels": {
                    "owners": {"url": sink.url("/serve-owners")},
                    "email": {"url": smtp.url(), "per_recipient": True},
                },
                "routes": [
                    {"recipient_types": ["recipient-type:system-owner"], "channels": ["owners"]},
                    {"recipient_types": ["recipient-type:access-control-requester"], "channels": ["email"]},
                ],
                "preferences": {"public_url": base, "secret": "x" * 40},
            }
        )
    )
    with _serve(config, base):
        _post(base)
        wait_for(lambda: smtp.mails, timeout=30)
        [mail] = smtp.mails
        assert mail.message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        link = str(mail.message["List-Unsubscribe"])[1:-1]
        assert link.startswith(base + "/unsubscribe/")
        # A scanner's GET changes nothing; the one-click POST does.
        assert _call(link)[0] == 200
        assert _admin(base, f"/api/v1/people/{quote(ALICE, safe='')}/preferences")["optOuts"] == []
        form = urlencode({"List-Unsubscribe": "One-Click"}).encode()
        status, _, _ = _call(link, form, {"Content-Type": "application/x-www-form-urlencoded"}, "POST")
        assert status == 200
        # The next notification, planned by one of the worker processes: no restart needed.
        event_id = _post(base)
        state = wait_for(lambda: _email_state(base, event_id), timeout=30)
        assert state == ("skipped", "opted out of notification:access-control-request-failed on email")
        wait_for(lambda: len(sink.at("/serve-owners")) == 4, timeout=30)

    with _serve(config, base):  # relay and its embedded Redis started again
        stored = _admin(base, f"/api/v1/people/{quote(ALICE, safe='')}/preferences")
        assert stored["optOuts"] == [{"kind": "notification:access-control-request-failed", "channel": "email"}]
        event_id = _post(base)
        state = wait_for(lambda: _email_state(base, event_id), timeout=30)
        assert state == ("skipped", "opted out of notification:access-control-request-failed on email")
        wait_for(lambda: len(sink.at("/serve-owners")) == 6, timeout=30)  # two owner messages a notification
        assert len(smtp.mails) == 1
        # Counted by a worker process, shown by serve's /metrics; since this start (a Prometheus counter starts
        # again with its process), the Redis totals of the admin page carrying on.
        skips = 'relay_preference_skips_total{channel="email",kind="notification:access-control-request-failed"} 1.0'
        wait_for(lambda: skips in _call(base + "/metrics")[1], timeout=5)
