"""Sends keep their HTTP connections open (relay.delivery.keepalive), and carry nothing else between sends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests

from relay.delivery.channels import send


class KeepAliveServer:
    """HTTP/1.1 with keep-alive; notes each request's client port and Cookie header, sets a cookie."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                server.seen.append((self.client_address[1], self.headers.get("Cookie")))
                self.send_response(200)
                self.send_header("Set-Cookie", "session=abc123; Path=/")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[KeepAliveServer]:
    s = KeepAliveServer()
    yield s
    s.stop()


def test_sends_of_one_thread_reuse_the_connection(server: KeepAliveServer) -> None:
    url = f"json://127.0.0.1:{server.port}/hook"
    assert all(send(url, "t", f"body {i}", "txt").ok for i in range(3))
    ports = {port for port, _ in server.seen}
    assert len(server.seen) == 3
    assert len(ports) == 1, "each send opened a connection of its own"


def test_no_cookie_is_carried_from_one_send_to_the_next(server: KeepAliveServer) -> None:
    url = f"json://127.0.0.1:{server.port}/hook"
    assert send(url, "t", "one", "txt").ok
    assert send(url, "t", "two", "txt").ok
    assert [cookie for _, cookie in server.seen] == [None, None]


def test_requests_outside_a_send_is_left_as_it_was(server: KeepAliveServer) -> None:
    assert send(f"json://127.0.0.1:{server.port}/hook", "t", "installs the hook", "txt").ok
    for _ in range(2):
        assert requests.post(f"http://127.0.0.1:{server.port}/plain", json={}, timeout=5).status_code == 200
    plain = [port for port, _ in server.seen[1:]]
    assert len(set(plain)) == 2, "requests.post outside a send should not share a connection"
