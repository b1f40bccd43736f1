"""`relay serve` and `relay api` on a port that is taken, and what `relay serve` says once it listens."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from relay.runtime.embedded import EmbeddedRedis
from tests.runtime.test_serve import _processes_mentioning
from tests.servers import free_port, wait_for

RELAY = str(Path(sys.executable).parent / "relay")


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another program listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield int(other.getsockname()[1])


def _config(tmp_path: Path, port: int, **extra: object) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"server": {"port": port}, "data_dir": str(tmp_path / "data"), **extra}))
    return path


def _assert_refused(result: subprocess.CompletedProcess[str], port: int) -> None:
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # one line: no traceback, no log of things started
    assert f"port {port} is already in use" in lines[0]
    assert "server.port" in lines[0] and "RELAY_SERVER__PORT" in lines[0]
    assert "listening" not in result.stderr and "Traceback" not in result.stderr


def test_serve_on_a_port_in_use_says_so_and_starts_nothing(tmp_path: Path, taken_port: int) -> None:
    config = _config(tmp_path, taken_port)
    result = subprocess.run(
        [RELAY, "serve", "--config", str(config), "--workers", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    _assert_refused(result, taken_port)
    assert "--port" in result.stderr
    # The port is looked at before anything starts: no embedded Redis, no worker.
    assert "embedded Redis" not in result.stderr
    assert not (tmp_path / "data").exists()
    assert _processes_mentioning(str(tmp_path)) == []


def test_api_on_a_port_in_use_says_so(tmp_path: Path, taken_port: int, redis_server: EmbeddedRedis) -> None:
    config = _config(tmp_path, taken_port, redis={"url": redis_server.url})
    result = subprocess.run(
        [RELAY, "api", "--config", str(config)], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    _assert_refused(result, taken_port)


def test_serve_says_where_it_listens_and_where_the_admin_page_is(tmp_path: Path) -> None:
    port = free_port()
    config = _config(tmp_path, port, logging={"format": "text"})
    proc = subprocess.Popen(
        [RELAY, "serve", "--config", str(config), "--workers", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
    )
    lines: list[str] = []
    assert proc.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any("admin page:" in line for line in lines), timeout=30)
        listening = next(line for line in lines if "relay listening on" in line)
        assert f"http://127.0.0.1:{port}/webhook with 1 worker(s)" in listening
        admin = next(line for line in lines if "admin page:" in line)
        assert admin.rstrip().endswith(f"admin page: http://127.0.0.1:{port}/ui")
        # The page is there (open on loopback when no admin_tokens are configured).
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ui", timeout=10) as page:
            assert page.status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        reader.join(5)
