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
    assert 'pip install ".${EXTRAS:+[$EXTRAS]}"' in (DEPLOY / "Dockerfile").read_text()
    project = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())["project"]
    assert "otel" in project["optional-dependencies"]
    assert "relay[otel]" in project["optional-dependencies"]["test"]
