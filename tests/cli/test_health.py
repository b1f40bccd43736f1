"""`relay health`, the image's HEALTHCHECK: the role read from PID 1's command line, the API's /healthz on
server.port as configured (and as relay was started), a worker's own heartbeat file."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from relay.cli import health, main
from relay.config import DEAD_WORKER_AFTER
from relay.runtime import beatfile
from tests.servers import free_port, serve_http


@pytest.fixture
def beat_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # what $TMPDIR does
    return tmp_path


@pytest.fixture
def healthz() -> Iterator[int]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/healthz" else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server, _ = serve_http(Handler)
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def _config(tmp_path: Path, port: int) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"server": {"port": port}}))
    return str(path)


def test_the_role_and_options_are_read_from_relays_command_line() -> None:
    role, found = health.relay_command(b"/opt/venv/bin/python\0/opt/venv/bin/relay\0worker\0--config\0/c.yaml\0")
    assert (role, found.config, found.port) == ("worker", "/c.yaml", None)
    role, found = health.relay_command(b"python3\0-m\0relay\0serve\0--port\x009090\0--host\x00127.0.0.2\0")
    assert (role, found.port, found.host) == ("serve", "9090", "127.0.0.2")
    assert health.relay_command(b"/sbin/init\0splash\0")[0] is None
    assert health.relay_command(b"relay-like\0worker\0")[0] is None


def test_the_api_check_asks_healthz_on_the_configured_port(
    tmp_path: Path, healthz: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["health", "--api", "--config", _config(tmp_path, healthz)]) == 0
    assert f"healthy: http://127.0.0.1:{healthz}/healthz answered 200" in capsys.readouterr().out
    assert main(["health", "--api", "--config", _config(tmp_path, free_port())]) == 1
    assert "unhealthy" in capsys.readouterr().err


def test_the_api_check_follows_the_port_relay_was_started_with(tmp_path: Path, healthz: int) -> None:
    started_with = health.relay_command(f"relay\0serve\0--port\0{healthz}\0".encode())[1]
    ok, text = health.check_api(_config(tmp_path, free_port()), started_with.host, started_with.port)
    assert ok, text


def test_the_worker_check_is_its_own_recent_heartbeat(beat_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["health", "--worker"]) == 1
    assert "no worker heartbeat here" in capsys.readouterr().err
    beatfile.touch()
    assert beatfile.beat_file().parent == beat_dir
    assert main(["health", "--worker"]) == 0
    old = time.time() - DEAD_WORKER_AFTER - 5
    os.utime(beatfile.beat_file(), (old, old))
    assert main(["health", "--worker"]) == 1
    assert "50 s old (dead_worker_after: 45 s)" in capsys.readouterr().err
    beatfile.remove()
    assert beatfile.last_beat() is None


def test_the_worker_check_judges_the_beat_by_dead_worker_after(beat_dir: Path) -> None:
    """The same threshold as /readyz and the sweep: the config's `dead_worker_after`."""
    config = beat_dir / "config.json"
    config.write_text(json.dumps({"dead_worker_after": "100s"}))
    beatfile.touch()
    old = time.time() - 60
    os.utime(beatfile.beat_file(), (old, old))
    assert main(["health", "--worker", "--config", str(config)]) == 0
    assert main(["health", "--worker"]) == 1  # the default, 45 s
