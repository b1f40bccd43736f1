"""`relay serve` exporting over OTLP/HTTP to a receiver of the test's: the spans of one notification, posted
with the platform's traceparent, arrive from the API process and the worker processes under that trace id,
each process its own service instance; the delivery record and the JSON log lines carry the trace id."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.conftest import sample_notification
from tests.processes import stop
from tests.servers import HttpSink, SmtpSink, free_port, http_get, serve_config, serve_http, wait_for

RELAY = str(Path(sys.executable).parent / "relay")
TRACE = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{TRACE}-b7ad6b7169203331-01"
TOKEN = "otlp-token-1234"
ADMIN = "otlp-admin-5678"


@dataclass
class Received:
    """One span as the receiver decoded it, with its process's resource attributes."""

    name: str
    trace_id: str
    resource: dict[str, str]
    attributes: dict[str, Any]


@dataclass
class OtlpReceiver:
    """The OTLP/HTTP traces endpoint (POST /v1/traces, protobuf), collecting what it decodes."""

    spans: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.add(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server, self.url = serve_http(Handler)
        return self

    def add(self, request: ExportTraceServiceRequest) -> None:
        found = []
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    attributes = {a.key: _value(a.value) for a in span.attributes}
                    found.append(Received(span.name, span.trace_id.hex(), resource, attributes))
        with self.lock:
            self.spans.extend(found)

    def of(self, trace_id: str) -> list[Received]:
        with self.lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    found = OtlpReceiver().start()
    yield found
    found.stop()


def test_serve_exports_one_trace_from_the_api_and_the_workers(
    tmp_path: Path, receiver: OtlpReceiver, sink: HttpSink, smtp: SmtpSink
) -> None:
    port = free_port()
    config = serve_config(tmp_path, port, sink, smtp, TOKEN, ADMIN, "/otlp-owners")
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RELAY_"))}
    # Only OpenTelemetry's own variables: the endpoint turns tracing on; spans are sent every 100 ms.
    env |= {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        [RELAY, "serve", "--config", str(path), "--workers", "2"], stdout=log, stderr=subprocess.STDOUT, env=env
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: http_get(base + "/readyz")[0] == 200, timeout=30)
        payload = sample_notification()
        event_id = payload["metadata"]["eventId"]
        request = urllib.request.Request(
            base + "/webhook",
            data=json.dumps(payload).encode(),
            headers={
                "Authorization": f"Bearer {TOKEN}",
                "Content-Type": "application/json",
                "traceparent": TRACEPARENT,
            },
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 202

        def arrived() -> list[Received] | None:
            spans = receiver.of(TRACE)
            return spans if len([s for s in spans if s.name == "relay.send"]) == 3 else None

        spans = wait_for(arrived, timeout=20, interval=0.2)
        roles = {s.resource.get("relay.role") for s in spans}
        assert roles == {"api", "worker"}
        api = {s.resource["service.instance.id"] for s in spans if s.resource["relay.role"] == "api"}
        workers = {s.resource["service.instance.id"] for s in spans if s.resource["relay.role"] == "worker"}
        assert len(api) == 1 and workers and not api & workers  # each process its own instance
        assert {s.resource["service.name"] for s in spans} == {"relay"}
        names = {s.name for s in spans}
        assert {"POST /webhook", "relay.plan", "relay.deliver", "relay.render", "relay.send", "relay.record"} <= names
        sends = [s for s in spans if s.name == "relay.send"]
        assert {s.attributes["relay.channel"] for s in sends} == {"owners", "email"}
        assert {s.attributes["relay.outcome"] for s in sends} == {"delivered"}
        # Nothing outside a notification's or a request's trace: no trace of RQ's polling or the heartbeats.
        assert not [s for s in receiver.spans if s.attributes.get("db.system") == "redis" and s.trace_id != TRACE]

        status = subprocess.run(
            [RELAY, "status", event_id, "--config", str(path), "--format", "json"],
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
        )
        shown = json.loads(status.stdout)
        assert shown["traceId"] == TRACE and {d["traceId"] for d in shown["deliveries"]} == {TRACE}
    finally:
        stop(proc)
        log.close()
    lines = [json.loads(line) for line in (tmp_path / "serve.log").read_text().splitlines() if line.startswith("{")]
    mine = [line for line in lines if line.get("eventId") == event_id]
    assert len(mine) >= 4 and {line.get("traceId") for line in mine} == {TRACE}
