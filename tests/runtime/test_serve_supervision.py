"""`relay serve`'s supervision of its workers, end to end: as PID 1 (in a PID namespace of its own, as in a
container) it restarts no worker and delivers; a worker that cannot start makes it exit non-zero, soon,
with the cause."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from relay.runtime.restarts import GIVE_UP_EXIT_CODE
from tests.conftest import sample_notification
from tests.processes import children, stop
from tests.runtime.test_serve import RELAY
from tests.servers import HttpSink, free_port, http_get, wait_for

TOKEN = "supervision-token-1234"


@pytest.mark.slow
def test_a_worker_that_cannot_start_makes_serve_exit_non_zero_with_the_cause(tmp_path: Path) -> None:
    # The API starts (it connects lazily); each worker fails at start: nothing listens at redis.url.
    config = {"server": {"port": free_port()}, "redis": {"url": f"redis://127.0.0.1:{free_port()}/0"}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    started = time.monotonic()
    done = subprocess.run(
        [RELAY, "serve", "--config", str(path), "--workers", "1"], capture_output=True, text=True, timeout=90
    )
    took = time.monotonic() - started
    assert done.returncode == GIVE_UP_EXIT_CODE, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("relay: a worker failed to start 3 times in a row"), last
    assert "exited with code 5" in last and "cannot reach Redis" in last  # 5: Redis unreachable
    assert took < 60


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare(1)")
def test_serve_as_pid_1_restarts_no_worker_and_delivers(tmp_path: Path, sink: HttpSink) -> None:
    port = free_port()
    config = {
        "server": {"port": port, "auth": {"tokens": [TOKEN]}},
        "data_dir": str(tmp_path / "data"),
        "channels": {"owners": {"url": sink.url("/pid1-owners")}},
        "routes": [{"channels": ["owners"]}],
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    # A new PID namespace: relay serve is its PID 1, as in a container (unshare waits for it, and kills it
    # if it dies).
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--kill-child", RELAY, "serve", "--config", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        ready = wait_for(lambda: http_get(base + "/readyz")[0] == 200, timeout=60, interval=0.1)
        request = urllib.request.Request(
            base + "/webhook",
            data=json.dumps(sample_notification()).encode(),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 202
        wait_for(lambda: sink.at("/pid1-owners"), timeout=20)
        time.sleep(1)  # the old check took parent PID 1 for an orphan at each worker's first beats
        code, body = http_get(base + "/readyz")
        assert code == 200 and json.loads(body)["workers"] == 2, ready
        (serve,) = children(proc.pid)  # PID 1 inside, an ordinary pid here
        started = time.monotonic()
        os.kill(serve, signal.SIGTERM)
        assert proc.wait(25) == 0
        assert time.monotonic() - started < 20
    finally:
        if proc.poll() is None:
            stop(proc)
        assert proc.stdout is not None
        output = proc.stdout.read().decode()
        proc.stdout.close()
    assert "starting it again" not in output and "exited with" not in output, output[-3000:]
