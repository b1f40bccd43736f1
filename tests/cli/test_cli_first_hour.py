"""The operator's first hour at the command line: a bare `relay check`, every config error at once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from relay.cli import main
from relay.cli.main import INVALID_CONFIG

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bare_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with no config.yaml and no RELAY_CONFIG: what a newcomer has."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RELAY_CONFIG", raising=False)
    return tmp_path


def test_check_without_a_config_warns_that_nothing_would_be_sent(
    bare_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check"]) == 0
    out = capsys.readouterr()
    assert "warn  no config file" in out.err and "nothing would be sent" in out.err
    assert "config.example.yaml" in out.err
    assert "config is valid, with 1 warning(s)" in out.out

    assert main(["check", "--strict"]) == 1
    assert "--strict: failing" in capsys.readouterr().out


def test_check_points_at_the_example_beside_it_but_does_not_read_it(
    bare_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(ROOT / "config.example.yaml", bare_dir / "config.example.yaml")
    assert main(["check"]) == 0
    out = capsys.readouterr()
    assert "./config.example.yaml is here: try `relay check --config config.example.yaml`" in out.err
    assert "ok    no config file" in out.out and "owners-slack" not in out.out

    # Its placeholder tokens are the only warnings: fine on loopback, refused beyond it (tests/cli/test_tokens.py).
    assert main(["check", "--config", "config.example.yaml", "--strict"]) == 1
    out = capsys.readouterr()
    assert "ok    config file config.example.yaml" in out.out
    warnings = [line for line in out.err.splitlines() if line.startswith("warn")]
    assert [w.split(":")[0] for w in warnings] == [
        "warn  server.auth.tokens[0] contains 'change-me'",
        "warn  server.admin_tokens[0] contains 'change-me'",
    ]


def test_check_warns_about_a_config_that_routes_nowhere(bare_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (bare_dir / "config.yaml").write_text("channels: {a: {url: 'json://127.0.0.1:9/a'}}\n")
    assert main(["check"]) == 0
    assert "warn  no routes and no default channels" in capsys.readouterr().err
    assert main(["check", "--strict"]) == 1


def test_check_reports_every_error_with_its_key_path(bare_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (bare_dir / "config.yaml").write_text(
        """
server: {port: 70000}
channels:
  ok: {url: "json://127.0.0.1:9/ok"}
  broken: {url: "nosuchscheme://host/path"}
routes:
  - channels: [ok]
  - channels: [ok]
  - channels: [x]
"""
    )
    assert main(["check"]) == 1
    err = capsys.readouterr().err
    assert "error routes[2].channels[0]: unknown channel 'x'" in err
    assert "error server.port: must be at most 65535 (it is 70000)" in err
    assert "error channels.broken.url: unsupported or malformed URL (scheme 'nosuchscheme')" in err
    assert "3 problem(s) found" in err

    # The other commands refuse the file naming each key too (the channel URL is check's own).
    assert main(["status", "some-event"]) == INVALID_CONFIG
    err = capsys.readouterr().err
    assert "routes[2].channels[0]: unknown channel 'x'" in err and "server.port" in err
