"""No configured secret, in any spelling, ever leaves relay: logs, error texts, answers, metrics, CLI output.

Every secret carries an upper-case LEAK marker that survives percent-, plus- and JSON-encoding unchanged,
so searching all output for the markers (case-insensitively) catches every form of a leak.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses
import yaml
from redis import Redis
from starlette.testclient import TestClient

from relay.cli import main
from relay.config import load_config
from relay.core.clock import system_clock
from relay.core.redaction import Redactor
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime, build
from relay.runtime.embedded import EmbeddedRedis
from relay.runtime.logs import JsonFormatter, setup_logging
from relay.web.auth import sign
from tests.clock import ManualClock
from tests.conftest import run_scheduled, run_worker, sample_notification
from tests.servers import HttpSink, SmtpSink, free_port

WEBHOOK_TOKEN = "wh-LEAKWEBHOOK01-token"
ADMIN_TOKEN = "adm-LEAKADMIN02-token"
BASIC_PASSWORD = "pw:LEAKBASIC03/+x"
HMAC_SECRET = "hmac-LEAKHMAC04-0123456789"
SLACK_URL = "slack://TLEAKSLACKA05/BLEAKSLACKB06/LeakSlackC07xyzQRSTUVW/#general"
# Percent-encoded in the URL: the configured spelling differs from what Apprise and SMTP use.
MAIL_PASSWORD = "m%40il%2FLEAKMAIL08%2Bpw"
MAILTOS_PASSWORD = "LEAK%2BMAILTOS18%40x"
HEADER_QUERY = "+X-Api-Key=k%20LEAKHDR10%2Fv&+Authorization=Bearer%20LEAKBEARER11"
JSON_PASSWORD = "LEAK%2BJSONPW12%40pw"
SECRET_PATH = "/leak-path-LEAKPATH13"
BROKEN_URL = "slack://TLEAKBADSLACK16"
OK_HEADER = "LEAKHDROK17"
PLATFORM_TOKEN = "LEAKPLATFORM19-access"
MARKERS = [
    "LEAKWEBHOOK01",
    "LEAKADMIN02",
    "LEAKBASIC03",
    "LEAKHMAC04",
    "LEAKSLACKA05",
    "LEAKSLACKB06",
    "LeakSlackC07",
    "LEAKMAIL08",
    "LEAKHDR10",
    "LEAKBEARER11",
    "JSONPW12",
    "LEAKPATH13",
    "LEAKBADSLACK16",
    "LEAKHDROK17",
    "MAILTOS18",
    "LEAKPLATFORM19",
]
KIND = "access-control-request-failed"


class RecordCapture(logging.Handler):
    """Every record as emitted, before any formatter scrubs it: message, exception and extra fields."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []
        self._plain = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message"}

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "responses":
            return  # the test's own HTTP mock, not part of relay
        self.texts.append(record.getMessage())
        if record.exc_info:
            self.texts.append(logging.Formatter().formatException(record.exc_info))
        self.texts.extend(f"{k}={v}" for k, v in record.__dict__.items() if k not in self._plain)


def config_data(sink: HttpSink, smtp: SmtpSink, tmp_path: Path, redis_url: str) -> dict[str, Any]:
    hook = f"json://apiuser:{JSON_PASSWORD}@127.0.0.1:{sink.port}{SECRET_PATH}?{HEADER_QUERY}"
    mail = f"mailto://mailer:{MAIL_PASSWORD}@127.0.0.1:{smtp.port}?from=relay@example.com&mode=insecure"
    mailtos = f"mailtos://mailer:{MAILTOS_PASSWORD}@127.0.0.1:{free_port()}?from=relay@example.com"
    everything = ["slack-owners", "hook-secret", "hook-ok", "broken"]
    return {
        "server": {
            "auth": {
                "tokens": [WEBHOOK_TOKEN],
                "basic": {"username": "platform", "password": BASIC_PASSWORD},
                "hmac": {"secret": HMAC_SECRET},
            },
            "admin_tokens": [ADMIN_TOKEN],
        },
        "redis": {"url": redis_url},
        "data_dir": str(tmp_path / "data"),
        "templates": {"dir": str(tmp_path / "templates")},
        "platform": {"access_token": PLATFORM_TOKEN},
        "retry": {"attempts": 2, "backoff": ["1s"]},
        # Without the outage rule, so that each failing path ends `failed` (a channel down holds its deliveries:
        # tests/delivery/test_outages.py checks that its errors keep secrets out too); /api/v1/channels still
        # shows each channel's last error.
        "channels": {
            name: {**channel, "outage": "off"}
            for name, channel in {
                "slack-owners": {"url": SLACK_URL},
                "hook-secret": {"url": hook},
                "hook-ok": {"url": f"json://127.0.0.1:{sink.port}/ok?+X-Api-Key={OK_HEADER}"},
                "broken": {"url": BROKEN_URL},
                "mail-auth": {"url": mail, "per_recipient": True},
                "mail-tls": {"url": mailtos, "per_recipient": True},
            }.items()
        },
        "routes": [
            {"recipient_types": ["recipient-type:access-control-requester"], "channels": ["mail-auth", "mail-tls"]},
            {"channels": everything},
        ],
    }


def failing_templates(root: Path) -> None:
    # A template that tries to escape the sandbox: rendering fails and the platform's text is sent.
    folder = root / KIND
    folder.mkdir(parents=True)
    for fmt in ("md", "txt"):
        (folder / f"system-owner.{fmt}.j2").write_text("{{ ''.__class__.__mro__[1].__subclasses__() }}")


@pytest.fixture
def leaky_setup(
    redis: Redis, redis_server: EmbeddedRedis, sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> Iterator[tuple[Runtime, Path]]:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config_data(sink, smtp, tmp_path, redis_server.url)), encoding="utf-8")
    failing_templates(tmp_path / "templates")
    sink.script[SECRET_PATH] = [500] * 10
    yield build(load_config(path, environ={}), redis, clock=ManualClock(system_clock())), path
    sink.script.pop(SECRET_PATH, None)


@pytest.fixture
def captured_logs() -> Iterator[tuple[RecordCapture, io.StringIO]]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield RecordCapture(), io.StringIO()
    root.handlers[:] = handlers
    root.setLevel(level)


def install_capture(records: RecordCapture, lines: io.StringIO, redactor: Redactor) -> None:
    """After setup_logging (which replaces the root handlers): raw records and relay's JSON lines, at DEBUG."""
    json_lines = logging.StreamHandler(lines)
    json_lines.setFormatter(JsonFormatter(redactor))
    root = logging.getLogger()
    root.addHandler(records)
    root.addHandler(json_lines)
    root.setLevel(logging.DEBUG)


def dump(answer: Any) -> str:
    return f"{answer.status_code} {dict(answer.headers)} {answer.text}"


def drive_webhook(client: TestClient, shown: list[str]) -> list[str]:
    """Accepted calls by every credential kind, then refused ones by every way of failing."""
    raw = json.dumps(sample_notification()).encode()
    ts = str(int(time.time()))
    basic = base64.b64encode(f"platform:{BASIC_PASSWORD}".encode()).decode()
    accepted = [
        {"Authorization": f"Bearer {WEBHOOK_TOKEN}"},
        {"X-Relay-Token": WEBHOOK_TOKEN},
        {"Authorization": f"Basic {basic}"},
        {"X-Relay-Signature": sign(HMAC_SECRET, ts, b"@"), "X-Relay-Timestamp": ts},
    ]
    event_ids = []
    for headers in accepted:
        payload = sample_notification()
        body = json.dumps(payload).encode()
        if "X-Relay-Signature" in headers:
            headers = {**headers, "X-Relay-Signature": sign(HMAC_SECRET, ts, body)}
        answer = client.post("/webhook", content=body, headers={"Content-Type": "application/json", **headers})
        assert answer.status_code == 202, answer.text
        event_ids.append(payload["metadata"]["eventId"])
        shown.append(dump(answer))
    wrong_basic = base64.b64encode(f"platform:{BASIC_PASSWORD}x".encode()).decode()
    refused = [
        {"Authorization": f"Bearer {WEBHOOK_TOKEN}x"},
        {"Authorization": f"Bearer {ADMIN_TOKEN}"},
        {"Authorization": f"Basic {wrong_basic}"},
        {"X-Relay-Signature": sign(HMAC_SECRET, ts, raw + b" "), "X-Relay-Timestamp": ts},
        {"X-Relay-Signature": sign(HMAC_SECRET, "1000", raw), "X-Relay-Timestamp": "1000"},
    ]
    for headers in refused:
        answer = client.post("/webhook", content=raw, headers={"Content-Type": "application/json", **headers})
        assert answer.status_code == 401
        shown.append(dump(answer))
    token = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}
    for content, kind in ((b"{bad", "application/json"), (raw, "text/plain"), (b"[]", "application/json")):
        shown.append(dump(client.post("/webhook", content=content, headers={**token, "Content-Type": kind})))
    return event_ids


def exhaust_retries(rt: Runtime) -> None:
    run_worker(rt)
    for _ in range(3):
        run_scheduled(rt)
        run_worker(rt)


def drive_admin(client: TestClient, event_ids: list[str], shown: list[str]) -> list[dict[str, Any]]:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    listing = client.get("/api/v1/deliveries?limit=500", headers=admin)
    shown.append(dump(listing))
    for event_id in event_ids:
        shown.append(dump(client.get(f"/api/v1/events/{event_id}", headers=admin)))
    shown.append(dump(client.post("/api/v1/deliveries/replay", json={"dryRun": True}, headers=admin)))
    shown.append(dump(client.post("/api/v1/deliveries/replay", json={"eventId": event_ids[0]}, headers=admin)))
    for path in ("/api/v1/deliveries", "/api/v1/events/x"):
        shown.append(dump(client.get(path, headers={"Authorization": f"Bearer {WEBHOOK_TOKEN}"})))
        shown.append(dump(client.get(path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}x"})))
    for path in ("/metrics", "/openapi.json", "/healthz", "/readyz", "/ui", "/api/v1/channels", "/nope"):
        shown.append(dump(client.get(path, headers=admin)))
    data: dict[str, Any] = listing.json()
    return data


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str], shown: list[str]) -> None:
    code = main(args)
    out = capsys.readouterr()
    shown.extend([out.out, out.err])
    assert code in (0, 1, 2), args


def assert_no_marker(texts: list[str], where: str) -> None:
    text = "\n".join(texts)
    for marker in MARKERS:
        found = [m.start() for m in re.finditer(re.escape(marker), text, re.IGNORECASE)]
        context = [text[max(0, i - 80) : i + 80] for i in found[:3]]
        assert not found, f"{marker} leaked in {where}: {context}"


def test_no_secret_leaks_anywhere(
    leaky_setup: tuple[Runtime, Path],
    sink: HttpSink,
    captured_logs: tuple[RecordCapture, io.StringIO],
    capsys: pytest.CaptureFixture[str],
) -> None:
    rt, config_file = leaky_setup
    records, json_lines = captured_logs
    setup_logging("DEBUG", "json", rt.redactor)
    install_capture(records, json_lines, rt.redactor)
    answers: list[str] = []
    cli: list[str] = []
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add_passthru("http://127.0.0.1")
        mock.add(responses.POST, re.compile(r"https://hooks\.slack\.com/.*"), status=500, body="internal error")
        with TestClient(create_app(rt)) as client:
            event_ids = drive_webhook(client, answers)
            exhaust_retries(rt)
            listing = drive_admin(client, event_ids, answers)
    payload = config_file.parent / "payload.json"
    payload.write_text(json.dumps(sample_notification()), encoding="utf-8")
    run_cli(["check", "--config", str(config_file)], capsys, cli)
    run_cli(["preview", str(payload), "--config", str(config_file)], capsys, cli)
    run_cli(["preview", str(payload), "--config", str(config_file), "--format", "json"], capsys, cli)
    run_cli(["deliveries", "--config", str(config_file), "--state", "failed"], capsys, cli)
    run_cli(["status", event_ids[1], "--config", str(config_file)], capsys, cli)

    # The paths were really taken, with the secrets really in use.
    failed = {d["channel"] for d in listing if d["state"] == "failed"}
    assert {"slack-owners", "hook-secret", "broken", "mail-auth", "mail-tls"} <= failed
    assert all(d["lastError"] for d in listing if d["state"] == "failed")
    assert sink.at("/ok") and sink.at("/ok")[0].headers["X-Api-Key"] == OK_HEADER
    logged = "\n".join(records.texts)
    assert "template" in logged and "delivery failed" in logged and "refused" in logged
    assert "invalid channel URL" in "\n".join(answers)
    assert any("error" in line for line in cli)

    assert_no_marker(records.texts, "log records")
    assert_no_marker([json_lines.getvalue()], "JSON log lines")
    assert_no_marker(answers, "HTTP answers")
    assert_no_marker(cli, "command output")
