"""Tracing is off by default, and then OpenTelemetry is never imported; what turns it on, and what wins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from relay import tracing
from relay.config import Config, ConfigError, load_config
from relay.runtime.embedded import EmbeddedRedis
from tests.servers import HttpSink

ENDPOINT = "http://127.0.0.1:4318"


@pytest.mark.parametrize(
    ("enabled", "environ", "on"),
    [
        (False, {}, False),
        (True, {}, True),
        (False, {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, True),
        (False, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ENDPOINT + "/v1/traces"}, True),
        (False, {"OTEL_EXPORTER_OTLP_ENDPOINT": ""}, False),
        (True, {"OTEL_SDK_DISABLED": "true"}, False),
        (False, {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_SDK_DISABLED": "TRUE"}, False),
        (True, {"OTEL_SDK_DISABLED": "false"}, True),
        (False, {"OTEL_SERVICE_NAME": "relay-eu"}, False),  # OpenTelemetry's other variables turn nothing on
    ],
)
def test_what_turns_tracing_on(enabled: bool, environ: dict[str, str], on: bool) -> None:
    assert tracing.wanted(enabled, environ) is on


def test_the_config_key_and_its_environment_override(tmp_path: Path) -> None:
    assert Config().tracing.enabled is False and Config().tracing.link("abc") is None
    on = load_config(
        None, {"RELAY_TRACING__ENABLED": "true", "RELAY_TRACING__UI_URL": "http://j:16686/trace/{trace_id}"}
    )
    assert on.tracing.enabled is True
    assert on.tracing.link("4bf9") == "http://j:16686/trace/4bf9"
    bad = tmp_path / "config.yaml"
    bad.write_text("tracing: {ui_url: 'http://jaeger:16686/search'}\n")
    with pytest.raises(ConfigError, match=r"tracing\.ui_url"):
        load_config(bad, {})


# Run in a fresh interpreter. BLOCK: OpenTelemetry made unimportable, as in the default install (no `otel`
# extra), each attempt to import it noted with the module that asked.
_RUN = """
import importlib.abc, json, os, sys

attempts = []
if os.environ.get("BLOCK") == "1":
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] != "opentelemetry":
                return None
            frame = sys._getframe(1)
            while frame is not None and frame.f_globals.get("__name__", "").startswith(("importlib", "_frozen")):
                frame = frame.f_back
            attempts.append((name, frame.f_globals.get("__name__", "?") if frame is not None else "?"))
            raise ImportError(name)
    sys.meta_path.insert(0, Block())

from starlette.testclient import TestClient
from relay import tracing
from relay.config import load_config
from relay.runtime.app import create_app
from relay.runtime.bootstrap import build
from relay.runtime.logs import setup_logging
from relay.runtime.worker import work_burst
from tests.conftest import sample_notification

config = load_config(sys.argv[1])
setup_logging("INFO", "json")
rt = build(config)
assert not tracing.start(config, "api", rt.name).on
payload = sample_notification()
with TestClient(create_app(rt)) as client:
    answer = client.post("/webhook", json=payload, headers={"Authorization": "Bearer off-token-1234"})
    assert answer.status_code == 202, answer.text
work_burst(rt)
[record] = rt.store.deliveries(rt.store.event_delivery_ids(payload["metadata"]["eventId"]))[:1]
print(json.dumps({"state": record.state, "public": record.public(), "attempts": attempts,
                  "modules": sorted(m for m in sys.modules if m.split(".")[0] in ("opentelemetry", "relay"))}))
"""


def _run_off(config: Path, block: bool) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", _RUN, str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
        env={**env, "BLOCK": "1" if block else "0"},
    )
    assert done.returncode == 0, done.stderr
    assert "traceId" not in done.stderr  # no trace id in any log line
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["state"] == "delivered" and "traceId" not in out["public"]
    return out


def test_off_by_default_relay_imports_nothing_of_opentelemetry(
    tmp_path: Path, redis_server: EmbeddedRedis, sink: HttpSink
) -> None:
    """A whole notification, webhook to send, with tracing off: in the default install (OpenTelemetry absent)
    nothing of relay even tries to import it; with the extra installed, nothing of relay's tracing is loaded.
    (redis-py 8 itself imports OpenTelemetry's metrics SDK when it is installed, for its own opt-in metrics.)"""
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "redis": {"url": redis_server.url},
                "server": {"auth": {"tokens": ["off-token-1234"]}},
                "channels": {"hook": {"url": sink.url("/off")}},
                "routes": [{"channels": ["hook"]}],
            }
        )
    )
    blocked = _run_off(config, block=True)
    assert [a for a in blocked["attempts"] if not a[1].startswith("redis.")] == []
    assert not [m for m in blocked["modules"] if m.startswith("opentelemetry")]
    installed = _run_off(config, block=False)
    relays = (
        "relay.tracing.otel",
        "opentelemetry.sdk.trace",
        "opentelemetry.instrumentation",
        "opentelemetry.exporter",
    )
    assert not [m for m in installed["modules"] if m.startswith(relays)]
    assert "relay.tracing" in installed["modules"]  # the switch itself: a module of relay's, no OpenTelemetry
    hits = sink.at("/off")
    assert len(hits) == 6  # the sample's three messages, twice
    assert not [h for h in hits if "traceparent" in {k.lower() for k in h.headers}]
