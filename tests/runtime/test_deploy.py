"""What can be checked of deploy/ without a container engine: files parse and name real commands."""

from __future__ import annotations

from pathlib import Path

import yaml

from relay.cli import parser

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_compose_services_run_relay_commands_on_redis_with_aof() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert {"redis", "api", "worker"} <= set(services)
    assert "--appendonly" in services["redis"]["command"]
    known = set(parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    for name in ("api", "worker"):
        assert services[name]["command"][0] == "relay" and services[name]["command"][1] in known
        assert services[name]["environment"]["RELAY_REDIS__URL"].startswith("redis://")


def test_dockerfile_runs_as_non_root_with_a_healthcheck() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert "USER relay" in text and "HEALTHCHECK" in text and "/healthz" in text
