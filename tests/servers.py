"""Real servers the tests start for themselves (an SMTP sink on aiosmtpd, an HTTP sink), and what the tests of
`relay serve` share: a GET, a threaded HTTP server, the config they serve."""

from __future__ import annotations

import asyncio
import email
import email.policy
import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller

# aiosmtpd logs each connection at info from its own thread, which may outlive the test whose captured stream
# it would write to ("--- Logging error ---" in the run's output): only its warnings are wanted.
logging.getLogger("mail.log").setLevel(logging.WARNING)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_http(handler: type[BaseHTTPRequestHandler], port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """`handler` served on 127.0.0.1 from a daemon thread: the server (to stop) and its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def http_get(url: str, token: str | None = None, timeout: float = 5) -> tuple[int, str]:
    """GET `url` (with a bearer token if given): its status and body, or (0, "") when nothing answers."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def http_post(url: str, body: Any, token: str, timeout: float = 10) -> int:
    """POST `body` as JSON with a bearer token: the status, or 0 when nothing answers."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def serve_config(
    tmp_path: Path, port: int, sink: HttpSink, smtp: SmtpSink, token: str, admin: str, owners: str
) -> dict[str, Any]:
    """The config of the `relay serve` tests: system owners to the sink's `owners` path, requesters by e-mail."""
    return {
        "server": {"port": port, "auth": {"tokens": [token]}, "admin_tokens": [admin]},
        "data_dir": str(tmp_path / "data"),
        "channels": {"owners": {"url": sink.url(owners)}, "email": {"url": smtp.url(), "per_recipient": True}},
        "routes": [
            {"recipient_types": ["recipient-type:system-owner"], "channels": ["owners"]},
            {"recipient_types": ["recipient-type:access-control-requester"], "channels": ["email"]},
        ],
    }


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


@dataclass
class Mail:
    envelope_from: str
    envelope_to: list[str]
    message: EmailMessage

    @property
    def subject(self) -> str:
        return str(self.message["Subject"])

    def part(self, content_type: str) -> str | None:
        for p in self.message.walk():
            if p.get_content_type() == content_type:
                return str(p.get_content())
        return None


class _Handler:
    def __init__(self, sink: SmtpSink) -> None:
        self.sink = sink

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
        await asyncio.sleep(self.sink.delay)
        with self.sink.lock:
            if self.sink.answers:
                return self.sink.answers.pop(0)  # a scripted refusal, e.g. "451 try later"
            self.sink.mails.append(Mail(envelope.mail_from, list(envelope.rcpt_tos), msg))  # type: ignore[arg-type]
        return "250 OK"


class SmtpSink:
    def __init__(self) -> None:
        self.port = free_port()
        self.mails: list[Mail] = []
        self.answers: list[str] = []  # SMTP replies to DATA answered in turn (then 250 OK)
        self.delay = 0.0  # seconds before each answer to DATA
        self.lock = threading.Lock()
        self.controller = Controller(_Handler(self), hostname="127.0.0.1", port=self.port)

    def start(self) -> SmtpSink:
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()

    def url(self, sender: str = "relay@example.com") -> str:
        return f"mailto://127.0.0.1:{self.port}?from={sender}&mode=insecure"

    def clear(self) -> None:
        with self.lock:
            self.mails.clear()
            self.answers.clear()
            self.delay = 0.0  # a test's slow server is not the next test's


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class HttpSink:
    """Collects POSTs; `script[path]` is a list of status codes answered in turn (then 200)."""

    hits: list[Hit] = field(default_factory=list)
    script: dict[str, list[int]] = field(default_factory=dict)
    delay: float = 0.0
    delays: dict[str, float] = field(default_factory=dict)  # per path
    started: list[str] = field(default_factory=list)  # paths of requests received, before any delay
    retry_after: dict[str, str] = field(default_factory=dict)  # Retry-After sent with 429/503, per path
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, port: int = 0) -> HttpSink:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                with sink.lock:
                    sink.started.append(self.path)
                    delay = sink.delays.get(self.path, sink.delay)
                if delay:
                    time.sleep(delay)
                with sink.lock:
                    codes = sink.script.get(self.path, [])
                    status = codes.pop(0) if codes else 200
                    if status < 300:
                        sink.hits.append(Hit(self.path, dict(self.headers), body))
                self.send_response(status)
                if status in (429, 503) and self.path in sink.retry_after:
                    self.send_header("Retry-After", sink.retry_after[self.path])
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server, _ = serve_http(Handler, port)
        self.port = self.server.server_address[1]
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str = "/hook") -> str:
        return f"json://127.0.0.1:{self.port}{path}"

    def at(self, path: str) -> list[Hit]:
        with self.lock:
            return [h for h in self.hits if h.path == path]

    def clear(self) -> None:
        with self.lock:
            self.hits.clear()
            self.script.clear()
            self.delays.clear()
            self.started.clear()
            self.retry_after.clear()
