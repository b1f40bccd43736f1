"""The README's failure-and-replay try-out, end to end: `relay sink --fail` refuses, a real `relay worker`
with `RELAY_RETRY__ATTEMPTS=1` records `failed`, the sink comes back, `relay replay` delivers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from redis import Redis
from starlette.testclient import TestClient

from relay.cli import main
from relay.config import load_config
from relay.runtime.app import create_app
from relay.runtime.bootstrap import build
from relay.runtime.embedded import EmbeddedRedis
from tests.conftest import WEBHOOK_TOKEN, post, sample_notification
from tests.servers import free_port, wait_for

RELAY = str(Path(sys.executable).parent / "relay")


class Sink:
    """`relay sink` as the operator runs it, in a subprocess; its printed lines are collected."""

    def __init__(self, http_port: int, smtp_port: int, fail: bool) -> None:
        args = [RELAY, "sink", "--http-port", str(http_port), "--smtp-port", str(smtp_port)]
        self.proc = subprocess.Popen(
            [*args, "--fail"] if fail else args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        wait_for(lambda: any(line.startswith("sink:") for line in self.lines), timeout=15)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # Ctrl-C, as in the README
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def ports() -> Iterator[dict[str, Any]]:
    state: dict[str, Any] = {"http": free_port(), "smtp": free_port(), "sinks": []}
    yield state
    for sink in state["sinks"]:
        sink.stop()


def _status(event_id: str, config: Path, capsys: pytest.CaptureFixture[str]) -> list[tuple[str, str]]:
    """(channel and address, state) of each delivery, as `relay status --json` gives them."""
    capsys.readouterr()
    assert main(["status", event_id, "--config", str(config), "--json"]) == 0
    deliveries = json.loads(capsys.readouterr().out)["deliveries"]
    return sorted((f"{d['channel']} {d['address'] or ''}".strip(), d["state"]) for d in deliveries)


def _worker(config: Path) -> None:
    env = {**os.environ, "RELAY_RETRY__ATTEMPTS": "1"}  # the try-out's one attempt, from the environment
    done = subprocess.run([RELAY, "worker", "--burst", "--config", str(config)], env=env, timeout=60)
    assert done.returncode == 0


def test_a_failing_sink_gives_failed_then_replay_delivers(
    redis: Redis, redis_server: EmbeddedRedis, ports: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # config.example.yaml's channels and routes, on this test's ports and Redis.
    example = yaml.safe_load((Path(__file__).resolve().parents[2] / "config.example.yaml").read_text())
    hook = f"json://127.0.0.1:{ports['http']}"
    example["channels"] = {
        "owners-slack": {"url": f"{hook}/owners"},
        "managers-teams": {"url": f"{hook}/managers"},
        "requester-email": {
            "url": f"mailto://127.0.0.1:{ports['smtp']}?from=relay@example.com&mode=insecure",
            "per_recipient": True,
        },
    }
    example.update(redis={"url": redis_server.url}, data_dir=str(tmp_path / "data"))
    example["server"]["auth"]["tokens"] = [WEBHOOK_TOKEN]
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(example))

    ports["sinks"].append(Sink(ports["http"], ports["smtp"], fail=True))
    payload = sample_notification()
    event_id = payload["metadata"]["eventId"]
    rt = build(load_config(config), redis)
    with TestClient(create_app(rt)) as client:
        assert post(client, payload).json() == {"eventId": event_id, "status": "accepted"}
    _worker(config)

    targets = ["managers-teams", "owners-slack", "requester-email alice.rossi@example.com"]
    assert _status(event_id, config, capsys) == [(target, "failed") for target in targets]
    failing = ports["sinks"][0]
    assert any("answered 500 (--fail)" in line for line in failing.lines)
    assert any("refused with 451 (--fail)" in line for line in failing.lines)

    failing.stop()
    ports["sinks"].append(working := Sink(ports["http"], ports["smtp"], fail=False))
    assert main(["replay", "--event", event_id, "--config", str(config)]) == 0
    assert "replayed 3 failed deliveries" in capsys.readouterr().out
    _worker(config)

    assert _status(event_id, config, capsys) == [(target, "delivered") for target in targets]
    wait_for(lambda: {"--- webhook /owners", "--- webhook /managers"} <= set(working.lines), timeout=5)
    assert any(line.startswith("--- e-mail to alice.rossi@example.com") for line in working.lines)
