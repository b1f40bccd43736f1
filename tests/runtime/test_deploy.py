"""What can be checked of deploy/ without a container engine: files parse and name real commands."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from relay.cli import parser
from relay.config import load_config

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
        # A worker exits on a Redis error and counts on its supervisor (docs/operations.md): compose is one.
        assert services[name]["restart"] == "unless-stopped"


def test_compose_redis_fsyncs_each_write_as_a_202_promises() -> None:
    redis = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]["redis"]
    command = redis["command"]
    assert command[command.index("--appendfsync") + 1] == "always"
    assert command[command.index("--appendonly") + 1] == "yes"


def _compose_environ(environment: dict[str, str]) -> dict[str, str]:
    """A service's environment as its container gets it, `${NAME:?...}` given a strong value."""
    return {k: re.sub(r"\$\{[A-Z_]+:\?[^}]*\}", "t" * 32, str(v)) for k, v in environment.items()}


def test_compose_channels_reach_compose_services_not_the_container_itself(tmp_path: Path) -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    text = (DEPLOY / "compose.yaml").read_text()
    assert "127.0.0.1" not in text.split("services:", 1)[1] and "localhost" not in text.split("services:", 1)[1]
    for name in ("api", "worker"):
        environ = _compose_environ(services[name]["environment"])
        config = load_config(DEPLOY.parent / "config.example.yaml", environ)
        for channel in config.channels.values():
            host = urlsplit(channel.url).hostname
            assert host in services, (name, channel.url)  # a service of this file, by its name
    # The sink listens beyond its container's loopback, where the channels send.
    assert services["sink"]["command"][:2] == ["relay", "sink"] and "0.0.0.0" in services["sink"]["command"]
    assert "sink" in parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]


def test_the_sink_takes_the_address_to_listen_on() -> None:
    args = parser().parse_args(["sink", "--host", "0.0.0.0"])
    assert args.host == "0.0.0.0" and parser().parse_args(["sink"]).host == "127.0.0.1"


def test_dockerfile_takes_its_base_runs_as_non_root_with_a_healthcheck_for_each_role() -> None:
    lines = (DEPLOY / "Dockerfile").read_text().splitlines()
    assert "ARG BASE=python:3.11-slim" in lines and "FROM ${BASE}" in lines
    assert "USER relay" in lines
    # Not a fixed port: `relay health` asks the API's /healthz on server.port, or reads a worker's heartbeat.
    (check,) = [line for line in lines if line.startswith("HEALTHCHECK")]
    assert check.endswith('CMD ["relay", "health"]') and "8080" not in check
    known = set(parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert "health" in known


def test_the_tracing_compose_file_adds_jaeger_and_points_api_and_workers_at_it() -> None:
    import tomllib

    from relay.config import TracingConfig

    tracing = yaml.safe_load((DEPLOY / "compose.tracing.yaml").read_text())["services"]
    assert "all-in-one" in tracing["jaeger"]["image"] and "16686:16686" in tracing["jaeger"]["ports"]
    for name in ("api", "worker"):
        assert tracing[name]["build"]["args"]["EXTRAS"] == "otel"
        environment = tracing[name]["environment"]
        assert environment["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4318"
        assert (
            TracingConfig(ui_url=environment["RELAY_TRACING__UI_URL"]).link("abc") == "http://localhost:16686/trace/abc"
        )
    assert 'pip install --only-binary :all: ".${EXTRAS:+[$EXTRAS]}"' in (DEPLOY / "Dockerfile").read_text()
    project = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())["project"]
    assert "otel" in project["optional-dependencies"]
    assert "-e .[otel]" in (DEPLOY.parent / "requirements-test.txt").read_text().splitlines()  # the tracing tests
