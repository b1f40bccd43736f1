"""The container image (deploy/Dockerfile), built and run with podman: `relay serve` as PID 1 delivers and is
healthy with no worker restarted; `relay api` and `relay worker` containers on an external Redis are healthy, and
deliver on a Redis that a Sentinel watches (`redis+sentinel://`).

Marked `container`: left out of the default run (pyproject's addopts), run by deploy/container-test.sh,
which installs podman and builds a base image where it can. Containers run with `--network host` (these
machines have no bridge network), so they reach the test's sinks and Redis on loopback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import sample_notification
from tests.processes import stop
from tests.replicas import RedisGroup
from tests.servers import HttpSink, free_port, http_get, wait_for

pytestmark = pytest.mark.container

ROOT = Path(__file__).resolve().parents[2]
BASE = os.environ.get("RELAY_IMAGE_BASE", "python:3.11-slim")
IMAGE = "localhost/relay-image-test:latest"
TOKEN = "container-token-1234"
# What these machines need (docs/container.md): runc (crun refuses their cgroups) and no default rlimits.
CONTAINERS_CONF = '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n'


class Podman:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.names: list[str] = []

    def __call__(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["podman", *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
        return done

    def run(self, config: Path, *command: str) -> str:
        name = f"relay-test-{uuid.uuid4().hex[:8]}"
        self.names.append(name)
        mount = f"{config}:/etc/relay/config.yaml:ro"
        self("run", "-d", "--name", name, "--network", "host", "-v", mount, IMAGE, *command)
        return name

    def healthy(self, name: str) -> subprocess.CompletedProcess[str]:
        return self("healthcheck", "run", name, check=False, timeout=60)

    def logs(self, name: str) -> str:
        done = self("logs", name, check=False)
        return done.stdout + done.stderr

    def remove_all(self) -> None:
        for name in self.names:
            self("rm", "-f", "-t", "0", name, check=False)
        self.names.clear()


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Podman]:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (deploy/container-test.sh installs it where it can)")
    env = dict(os.environ)
    if "CONTAINERS_CONF" not in env:
        conf = tmp_path_factory.mktemp("podman") / "containers.conf"
        conf.write_text(CONTAINERS_CONF)
        env["CONTAINERS_CONF"] = str(conf)
    tool = Podman(env)
    if tool("image", "exists", BASE, check=False).returncode != 0:
        pytest.skip(f"base image {BASE} is not in podman's store (deploy/container-test.sh builds one)")
    certs = ["-v", "/etc/ssl/certs:/etc/ssl/certs:ro"] if Path("/etc/ssl/certs").is_dir() else []
    started = time.monotonic()
    tool("build", "--format", "docker", "--network", "host", *certs, "--build-arg", f"BASE={BASE}",
         "-t", IMAGE, "-f", str(ROOT / "deploy" / "Dockerfile"), str(ROOT), timeout=600)  # fmt: skip
    print(f"image built in {time.monotonic() - started:.1f} s")
    try:
        yield tool
    finally:
        tool.remove_all()


def _config(tmp_path: Path, sink: HttpSink, port: int, **extra: Any) -> Path:
    path = tmp_path / "config.yaml"
    data = {
        "server": {"host": "127.0.0.1", "port": port, "auth": {"tokens": [TOKEN]}},
        "channels": {"owners": {"url": sink.url("/container-owners")}},
        "routes": [{"channels": ["owners"]}],
        **extra,
    }
    path.write_text(json.dumps(data))
    path.chmod(0o644)  # the container's user (uid 10001) reads it
    return path


def _send(port: int) -> str:
    payload = sample_notification()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/webhook",
        data=json.dumps(payload).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 202
    return str(payload["metadata"]["eventId"])


def _ready(port: int) -> dict[str, Any] | None:
    code, body = http_get(f"http://127.0.0.1:{port}/readyz")
    return json.loads(body) if code == 200 else None


def test_serve_as_pid_1_delivers_is_healthy_and_restarts_no_worker(
    podman: Podman, sink: HttpSink, tmp_path: Path
) -> None:
    port = free_port()  # not 8080: the health check follows server.port
    name = podman.run(_config(tmp_path, sink, port), "relay", "serve")
    try:
        # Ready once one worker beat; both within the wait (each starts on its own clock).
        try:
            wait_for(lambda: (r := _ready(port)) is not None and r["workers"] == 2, timeout=90, interval=0.5)
        except AssertionError:
            raise AssertionError(f"not ready with 2 workers: {_ready(port)}\n{podman.logs(name)}") from None
        _send(port)
        wait_for(lambda: sink.at("/container-owners"), timeout=30, interval=0.2)
        check = podman.healthy(name)
        assert check.returncode == 0, check.stdout + check.stderr
        time.sleep(2)  # the old PID 1 bug restarted the workers at their first beats
        logs = podman.logs(name)
        assert "starting it again" not in logs and "exited with" not in logs, logs
        assert _ready(port) == {"status": "ready", "redis": "ok", "workers": 2}  # not restarted ones counted again
        started = time.monotonic()
        podman("stop", "-t", "25", name, timeout=60)
        took = time.monotonic() - started
        code = podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
        print(f"relay serve in a container: stopped in {took:.1f} s, exit code {code}")
        assert code == "0" and took < 20, podman.logs(name)
    finally:
        podman.remove_all()


@pytest.fixture
def external_redis(tmp_path: Path) -> Iterator[str]:
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (deploy/container-test.sh installs it where it can)")
    port = free_port()
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop(proc)


def test_api_and_worker_containers_on_an_external_redis_are_healthy(
    podman: Podman, sink: HttpSink, tmp_path: Path, external_redis: str
) -> None:
    port = free_port()
    config = _config(tmp_path, sink, port, redis={"url": external_redis})
    try:
        api = podman.run(config, "relay", "api")
        worker = podman.run(config, "relay", "worker")
        wait_for(lambda: _ready(port), timeout=90, interval=0.5)
        _send(port)
        wait_for(lambda: sink.at("/container-owners"), timeout=30, interval=0.2)
        for name in (api, worker):
            check = podman.healthy(name)
            assert check.returncode == 0, f"{name}: {check.stdout}{check.stderr}\n{podman.logs(name)}"
        # Each container's check is its role's: the API's /healthz on server.port, the worker's own beat.
        assert f"127.0.0.1:{port}/healthz answered 200" in podman("exec", api, "relay", "health").stdout
        assert "the worker beat" in podman("exec", worker, "relay", "health").stdout
    finally:
        podman.remove_all()


def test_api_and_worker_containers_reach_redis_through_a_sentinel(
    podman: Podman, sink: HttpSink, tmp_path: Path
) -> None:
    group = RedisGroup(tmp_path / "redis", replicas=1, sentinels=1).start()
    port = free_port()
    config = _config(tmp_path, sink, port, redis={"url": group.url})
    try:
        api = podman.run(config, "relay", "api")
        worker = podman.run(config, "relay", "worker")
        wait_for(lambda: _ready(port), timeout=90, interval=0.5)
        _send(port)
        wait_for(lambda: sink.at("/container-owners"), timeout=30, interval=0.2)
        for name in (api, worker):
            check = podman.healthy(name)
            assert check.returncode == 0, f"{name}: {check.stdout}{check.stderr}\n{podman.logs(name)}"
    finally:
        podman.remove_all()
        group.stop()
