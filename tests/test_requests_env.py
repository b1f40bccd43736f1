"""Sends honour HTTP_PROXY, NO_PROXY and a .netrc, looked up once per process (relay.delivery.requests_env)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

from tests.servers import HttpSink

SEND = """
import sys
from relay.delivery.channels import send
for url in sys.argv[1:]:
    result = send(url, "title", "body", "txt")
    print(url, result.ok, result.error)
"""


def _send(env: dict[str, str], *urls: str) -> str:
    clean = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    done = subprocess.run(
        [sys.executable, "-c", SEND, *urls], env={**clean, **env}, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_sends_go_through_the_environments_proxy() -> None:
    proxy = HttpSink().start()
    try:
        out = _send({"HTTP_PROXY": f"http://127.0.0.1:{proxy.port}"}, "json://relay-test.invalid:8080/hook")
        assert "True" in out
        # A proxy gets the absolute URL in the request line.
        assert [h.path for h in proxy.hits] == ["http://relay-test.invalid:8080/hook"]
    finally:
        proxy.stop()


def test_no_proxy_hosts_are_reached_directly() -> None:
    proxy, direct = HttpSink().start(), HttpSink().start()
    try:
        env = {"http_proxy": f"http://127.0.0.1:{proxy.port}", "no_proxy": "localhost,127.0.0.1"}
        out = _send(env, f"json://127.0.0.1:{direct.port}/direct", "json://relay-test.invalid:8080/proxied")
        assert out.count("True") == 2, out
        assert [h.path for h in direct.hits] == ["/direct"]
        assert [h.path for h in proxy.hits] == ["http://relay-test.invalid:8080/proxied"]
    finally:
        proxy.stop()
        direct.stop()


def test_without_proxy_settings_sends_go_direct() -> None:
    direct = HttpSink().start()
    try:
        assert "True" in _send({}, f"json://127.0.0.1:{direct.port}/direct")
        assert [h.path for h in direct.hits] == ["/direct"]
    finally:
        direct.stop()


def test_a_netrc_file_gives_its_credentials(tmp_path: Path) -> None:
    direct = HttpSink().start()
    try:
        (tmp_path / ".netrc").write_text("machine 127.0.0.1 login relay-user password relay-pass-0001\n")
        (tmp_path / ".netrc").chmod(0o600)
        assert "True" in _send({"HOME": str(tmp_path)}, f"json://127.0.0.1:{direct.port}/netrc")
        expected = "Basic " + base64.b64encode(b"relay-user:relay-pass-0001").decode()
        assert [h.headers.get("Authorization") for h in direct.hits] == [expected]
    finally:
        direct.stop()


def test_without_a_netrc_file_no_credentials_are_sent(tmp_path: Path) -> None:
    direct = HttpSink().start()
    try:
        assert "True" in _send({"HOME": str(tmp_path)}, f"json://127.0.0.1:{direct.port}/plain")
        assert [h.headers.get("Authorization") for h in direct.hits] == [None]
    finally:
        direct.stop()
