"""`relay serve` as a subprocess, exactly as the README runs it: embedded Redis, API, workers, clean stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from relay.runtime.embedded import url_for
from tests.conftest import sample_notification
from tests.processes import children, stop
from tests.servers import HttpSink, SmtpSink, free_port, http_get, http_post, serve_config, wait_for

RELAY = str(Path(sys.executable).parent / "relay")


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next(line for line in (entry / "status").read_text().splitlines() if line.startswith("State:"))
        except (OSError, StopIteration):
            continue
        if text in cmdline and "zombie" not in state:
            found.append(int(entry.name))
    return found


@pytest.fixture
def served(tmp_path: Path, sink: HttpSink, smtp: SmtpSink) -> Iterator[dict[str, object]]:
    port = free_port()
    config = serve_config(tmp_path, port, sink, smtp, "serve-token-1234", "serve-admin-5678", "/serve-owners")
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))
    proc = subprocess.Popen(
        [RELAY, "serve", "--config", str(path), "--workers", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: http_get(base + "/readyz")[0] == 200, timeout=30)
        yield {"proc": proc, "base": base, "config": path, "data": tmp_path / "data"}
    finally:
        if proc.poll() is None:
            stop(proc)
        assert proc.stdout is not None
        proc.stdout.close()


def test_serve_send_status_and_clean_stop(
    served: dict[str, object], sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    config = str(served["config"])
    payload = sample_notification()
    payload_file = tmp_path / "payload.json"
    payload_file.write_text(json.dumps(payload))
    sent = subprocess.run(
        [RELAY, "send", str(payload_file), "--config", config], capture_output=True, text=True, timeout=30
    )
    assert sent.returncode == 0, sent.stderr
    status, body = sent.stdout.split(" ", 1)
    assert status == "202"
    assert json.loads(body) == {"eventId": payload["metadata"]["eventId"], "status": "accepted"}

    wait_for(lambda: len(sink.at("/serve-owners")) == 2 and smtp.mails, timeout=10)
    titles = sorted(h.json()["title"] for h in sink.at("/serve-owners"))
    assert titles == ["Access request failed", "Access request failed in a project you manage"]
    assert smtp.mails[0].envelope_to == ["alice.rossi@example.com"]

    event_url = f"{served['base']}/api/v1/events/{payload['metadata']['eventId']}"

    def delivered() -> bool:
        # Polled through the API: a `relay status` process a poll would cost a CPU-second each.
        code, text = http_get(event_url, "serve-admin-5678")
        return code == 200 and [d["state"] for d in json.loads(text)["deliveries"]] == ["delivered"] * 3

    # Two owners messages (legacy system-owner on the third message) and one e-mail.
    wait_for(delivered, timeout=10)
    out = subprocess.run(
        [RELAY, "status", payload["metadata"]["eventId"], "--config", config, "--json"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    assert sorted(d["state"] for d in json.loads(out.stdout)["deliveries"]) == ["delivered"] * 3
    table = subprocess.run(
        [RELAY, "status", payload["metadata"]["eventId"], "--config", config],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    assert "delivered" in table and "owners" in table
    # The e-mail's address column, and the embedded Redis that `rq info -u` can be pointed at.
    redis_url = url_for(Path(str(served["data"])))
    assert "alice.rossi@example.com" in table and f"redis {redis_url}  (rq info -u {redis_url})" in table

    code, text = http_get(event_url, "serve-admin-5678")
    assert code == 200 and len(json.loads(text)["deliveries"]) == 3

    proc = served["proc"]
    assert isinstance(proc, subprocess.Popen)
    data_dir = str(served["data"])
    assert _processes_mentioning(data_dir), "the embedded Redis should be running"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    time.sleep(0.2)
    assert _processes_mentioning(data_dir) == []
    assert _processes_mentioning(config) == []
    assert (served["data"] / "appendonly.aof").exists() or list(Path(data_dir).glob("appendonly*"))  # type: ignore[operator]
    assert proc.stdout is not None
    assert f"embedded Redis started: {redis_url}" in proc.stdout.read().decode()


def test_sigkill_of_serve_leaves_no_worker_scheduler_or_redis_behind(served: dict[str, object]) -> None:
    proc = served["proc"]
    assert isinstance(proc, subprocess.Popen)
    config, data_dir = str(served["config"]), str(served["data"])
    workers = wait_for(lambda: [p for p in children(proc.pid) if p in _processes_mentioning(config)], timeout=10)
    # One worker has forked RQ's scheduler (a copy of it, so its command line names the config too).
    schedulers = wait_for(lambda: [c for w in workers for c in children(w)], timeout=10)
    assert len(workers) == 2 and len(schedulers) == 1
    assert sorted(_processes_mentioning(config)) == sorted([proc.pid, *workers, *schedulers])
    proc.kill()  # what the OOM killer does
    proc.wait(10)
    # The kernel SIGTERMs the workers and the Redis (their parent died), then each worker's scheduler.
    wait_for(lambda: _processes_mentioning(config) == [] and _processes_mentioning(data_dir) == [], timeout=20)


def test_sighup_reloads_api_and_workers(served: dict[str, object], sink: HttpSink, tmp_path: Path) -> None:
    path = served["config"]
    assert isinstance(path, Path)
    data = json.loads(path.read_text())
    data["channels"]["new-owners"] = {"url": sink.url("/reloaded-owners")}
    data["routes"] = [{"recipient_types": ["recipient-type:system-owner"], "channels": ["new-owners"]}]
    path.write_text(json.dumps(data))
    proc = served["proc"]
    assert isinstance(proc, subprocess.Popen)
    proc.send_signal(signal.SIGHUP)

    def routed_anew() -> bool:
        # Workers see the new generation within a heartbeat (5 s); until then, send again and look.
        # Through the API (test_serve_send_status_and_clean_stop runs `relay send`): a process each try is dear.
        http_post(f"{served['base']}/webhook", sample_notification(), "serve-token-1234")
        time.sleep(0.5)
        return bool(sink.at("/reloaded-owners"))

    wait_for(routed_anew, timeout=20, interval=1)
    assert proc.poll() is None
