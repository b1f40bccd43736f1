"""Weak tokens: `relay check` warns about them, `relay serve` and `relay api` refuse them beyond loopback,
naming the key and `relay token`, which prints a strong one."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from redis import Redis
from starlette.testclient import TestClient

from relay.cli import main
from relay.cli.common import refuse_open_bind
from relay.cli.main import INVALID_CONFIG
from relay.config import Config, load_config
from relay.runtime.app import create_app
from relay.runtime.bootstrap import build, reload_runtime
from relay.runtime.embedded import EmbeddedRedis
from tests.servers import free_port

RELAY = str(Path(sys.executable).parent / "relay")
STRONG = "s" * 24  # the shortest strong token


def write(tmp_path: Path, **server: Any) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"server": server, "data_dir": str(tmp_path / "data")}))
    return path


def test_relay_token_prints_a_fresh_32_byte_token(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["token"]) == 0
    assert main(["token"]) == 0
    first, second = capsys.readouterr().out.split()
    assert first != second and len(first) == 43  # 32 bytes, URL-safe base64 without padding
    assert set(first) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert not Config.model_validate({"server": {"auth": {"tokens": [first]}}}).server.weak_credentials()


def test_check_names_each_weak_credential_and_never_its_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        auth={"tokens": [STRONG, "short-one"], "basic": {"username": "u", "password": "x-CHANGE-ME-please-longer"}},
        admin_tokens=["change-me-admin-token-but-long"],
    )
    assert main(["check", "--config", str(path)]) == 0
    err = capsys.readouterr().err
    assert "warn  server.auth.tokens[1] is shorter than 24 characters: it could be guessed (fine on loopback" in err
    assert "warn  server.admin_tokens[0] contains 'change-me'" in err
    assert "warn  server.auth.basic.password contains 'change-me'" in err
    assert "auth.tokens[0]" not in err and "`relay token` prints a strong one" in err
    assert "short-one" not in err and "please" not in err and "admin-token-but" not in err
    assert main(["check", "--config", str(path), "--strict"]) == 1


def test_check_says_serve_would_refuse_them_beyond_loopback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, host="0.0.0.0", auth={"tokens": ["short"]})
    assert main(["check", "--config", str(path)]) == 0
    assert "`relay serve` and `relay api` refuse it on 0.0.0.0" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["api", "serve"])
def test_a_weak_token_is_refused_beyond_loopback_before_anything_listens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    port = free_port()
    path = write(tmp_path, host="0.0.0.0", port=port, auth={"tokens": [STRONG]}, admin_tokens=["change-me-admin"])
    assert main([command, "--config", str(path)]) == INVALID_CONFIG
    err = capsys.readouterr().err
    assert "server.host is '0.0.0.0', reachable by others" in err
    assert "server.admin_tokens[0] contains 'change-me'" in err and "`relay token` prints one" in err
    assert "change-me-admin" not in err.replace("contains 'change-me'", "")
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, "nothing may listen after a refusal"
    assert not (tmp_path / "data").exists(), "no embedded Redis started"


def test_serve_refuses_a_weak_token_given_with_host_on_the_command_line(tmp_path: Path) -> None:
    """As an operator runs it: `relay serve --host 0.0.0.0`, a subprocess, refused in one line."""
    path = write(tmp_path, port=0, auth={"tokens": ["change-me-webhook-token"]}, admin_tokens=[STRONG])
    done = subprocess.run(
        [RELAY, "serve", "--config", str(path), "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == INVALID_CONFIG
    assert done.stderr.startswith("relay: server.host is '0.0.0.0'")
    assert "server.auth.tokens[0] contains 'change-me'" in done.stderr and "relay token" in done.stderr
    assert "relay listening" not in done.stderr + done.stdout


def test_loopback_and_strong_tokens_start() -> None:
    """The README's first screen (the example's placeholders on 127.0.0.1) is unchanged; strong tokens bind anywhere."""
    weak = {"auth": {"tokens": ["change-me-webhook-token"]}, "admin_tokens": ["change-me-admin-token"]}
    for host in ("127.0.0.1", "localhost", "::1"):
        refuse_open_bind(Config.model_validate({"server": {**weak, "host": host}}))
    refuse_open_bind(Config.model_validate({"server": {"host": "0.0.0.0", "auth": {"tokens": [STRONG]}}}))
    example = Path(__file__).resolve().parents[2] / "config.example.yaml"
    assert "host: 127.0.0.1" in example.read_text()


def test_a_reload_that_would_bring_a_weak_token_to_an_open_address_is_refused(
    redis: Redis, redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    """The address is kept across a reload, so the start's rule holds for the new tokens too."""
    data: dict[str, Any] = {
        "server": {"host": "0.0.0.0", "auth": {"tokens": [STRONG]}, "admin_tokens": [STRONG + "-admin"]},
        "redis": {"url": redis_server.url},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    rt = build(load_config(path), redis, config_file=path)
    data["server"]["auth"] = {"tokens": ["change-me-webhook-token"]}
    path.write_text(json.dumps(data))
    with TestClient(create_app(rt)) as client:
        refused = client.post("/api/v1/reload", headers={"Authorization": f"Bearer {STRONG}-admin"})
    assert refused.status_code == 422
    assert "server.auth.tokens[0] contains 'change-me'" in refused.json()["errors"][0]
    assert rt.config.server.auth.tokens == [STRONG]  # the running config stays
    # A worker never listens: its own reload takes the file as it is.
    assert reload_runtime(rt) == []
    assert rt.config.server.auth.tokens == ["change-me-webhook-token"]
