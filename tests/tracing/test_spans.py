"""One notification's trace, read from the SDK's in-memory exporter: one trace id from the POST (continuing
the platform's traceparent) to every send, parents right, attributes present, no secret in any span; the
trace id in the log lines and the delivery records; retries and digests linked. Real Redis, RQ, sinks."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, format_span_id, format_trace_id
from starlette.testclient import TestClient

from relay import tracing
from relay.config import Config
from relay.core.redaction import Redactor, expand
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.runtime.logs import JsonFormatter
from tests.conftest import ADMIN_TOKEN, admin, post, run_scheduled, run_worker, sample_notification
from tests.servers import HttpSink, SmtpSink

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE}-{PARENT}-01"
SECRET = "Zq7-s3cr3T-t0k3n-88421"  # a path token of the owners' webhook, as Slack's and Teams' carry one
EMAIL = "alice.rossi@example.com"


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def redactor() -> Redactor:
    return Redactor()


@pytest.fixture
def tracer(spans: InMemorySpanExporter, redactor: Redactor) -> Iterator[tracing.Tracer]:
    """The test's tracer: spans exported to `spans` as they end, scrubbed with `redactor`."""
    tracer = tracing.start(Config(), "test", "test-process", spans, redactor)
    assert tracer.on
    yield tracer
    tracer.stop()


@pytest.fixture
def make_runtime(
    make_runtime: Callable[..., Runtime], tracer: tracing.Tracer, redactor: Redactor
) -> Callable[..., Runtime]:
    """Runtimes that trace with the test's tracer, whose redactor knows their secrets."""

    def traced(**extra: Any) -> Runtime:
        rt = make_runtime(**extra)
        redactor.remember(rt.config)
        rt.redactor, rt.tracer = redactor, tracer
        return rt

    return traced


@pytest.fixture
def json_log(tracer: tracing.Tracer, redactor: Redactor) -> Iterator[io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter(redactor, tracer))
    root = logging.getLogger()
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.INFO)
    yield out
    root.removeHandler(handler)
    root.setLevel(level)


def _secret_channels(sink: HttpSink, smtp: SmtpSink) -> dict[str, Any]:
    return {
        "channels": {
            "owners-hook": {"url": sink.url(f"/owners/{SECRET}")},
            "requester-email": {"url": smtp.url(), "per_recipient": True},
        },
        "routes": [
            {"recipient_types": ["recipient-type:system-owner"], "channels": ["owners-hook"]},
            {"recipient_types": ["recipient-type:access-control-requester"], "channels": ["requester-email"]},
        ],
        "default": {"channels": []},
    }


def _ids(span: ReadableSpan) -> tuple[str, str, str | None]:
    assert span.context is not None
    parent = format_span_id(span.parent.span_id) if span.parent is not None else None
    return format_trace_id(span.context.trace_id), format_span_id(span.context.span_id), parent


def _named(found: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in found if s.name == name]


def test_one_trace_from_the_post_to_every_send(
    spans: InMemorySpanExporter,
    make_runtime: Callable[..., Runtime],
    sink: HttpSink,
    smtp: SmtpSink,
    json_log: io.StringIO,
) -> None:
    rt = make_runtime(**_secret_channels(sink, smtp))
    payload = sample_notification()
    event_id = payload["metadata"]["eventId"]
    with TestClient(create_app(rt)) as client:
        answer = post(client, payload, headers={"traceparent": TRACEPARENT})
        assert answer.status_code == 202
        run_worker(rt)
        found = spans.get_finished_spans()
        shown = admin(client, f"/api/v1/events/{event_id}").json()
    assert len(sink.at(f"/owners/{SECRET}")) == 2 and len(smtp.mails) == 1

    assert {_ids(s)[0] for s in found} == {TRACE}, "every span of this notification is in the platform's trace"

    [server] = [s for s in found if s.kind is SpanKind.SERVER]
    assert server.name == "POST /webhook" and _ids(server)[2] == PARENT
    [plan] = _named(found, "relay.plan")
    assert _ids(plan)[2] == _ids(server)[1]  # planned in the worker, as a child of the intake
    assert plan.attributes is not None and plan.attributes["relay.event_id"] == event_id
    tries = _named(found, "relay.deliver")
    assert len(tries) == 3 and {_ids(t)[2] for t in tries} == {_ids(plan)[1]}
    by_try = {_ids(t)[1]: t for t in tries}
    for step in ("relay.render", "relay.send", "relay.record"):
        steps = _named(found, step)
        assert len(steps) == 3 and {_ids(s)[2] for s in steps} == set(by_try), step
    for send in _named(found, "relay.send"):
        attributes = dict(send.attributes or {})
        channel = attributes["relay.channel"]
        assert attributes["relay.outcome"] == "delivered"
        assert channel == dict(by_try[str(_ids(send)[2])].attributes or {})["relay.channel"]
        if channel == "owners-hook":
            assert attributes["http.response.status_code"] == 200
        else:
            assert channel == "requester-email" and attributes["relay.smtp.code"] == 250
    assert {dict(t.attributes or {})["relay.state"] for t in tries} == {"delivered"}

    # The instrumentations: Apprise's HTTP request under its send, relay's Redis commands under their steps.
    sends = {_ids(s)[1] for s in _named(found, "relay.send")}
    http = [s for s in found if s.kind is SpanKind.CLIENT and s.name == "POST"]
    assert len(http) == 2 and {_ids(s)[2] for s in http} <= sends
    redis = [s for s in found if dict(s.attributes or {}).get("db.system") == "redis"]
    assert {_ids(s)[2] for s in redis} & {_ids(server)[1]}, "the intake's Redis script is a span of the request"

    # No secret, and no recipient address, in any span (names, attributes, events, links, resource).
    text = "\n".join(s.to_json() for s in found)
    assert SECRET not in text and EMAIL not in text
    assert f"/owners/{SECRET}" not in text

    # The trace id is in the records and in every log line of this notification.
    assert shown["traceId"] == TRACE and {d["traceId"] for d in shown["deliveries"]} == {TRACE}
    lines = [json.loads(line) for line in json_log.getvalue().splitlines()]
    mine = [line for line in lines if line.get("eventId") == event_id]
    assert len(mine) >= 4  # accepted, and each delivery delivered
    assert {line.get("traceId") for line in mine} == {TRACE}


def test_a_retry_is_in_the_same_trace_and_links_to_the_first_try(
    spans: InMemorySpanExporter, make_runtime: Callable[..., Runtime], sink: HttpSink
) -> None:
    rt = make_runtime(
        channels={"owners-hook": {"url": sink.url("/flaky")}},
        routes=[{"channels": ["owners-hook"]}],
        default={"channels": []},
    )
    sink.script["/flaky"] = [503]
    payload = sample_notification()
    payload["messages"] = payload["messages"][:1]
    with TestClient(create_app(rt)) as client:
        assert post(client, payload, headers={"traceparent": TRACEPARENT}).status_code == 202
        run_worker(rt)
        run_scheduled(rt)
        run_worker(rt)
    first, second = sorted(_named(spans.get_finished_spans(), "relay.deliver"), key=lambda s: s.start_time or 0)
    assert _ids(first)[0] == _ids(second)[0] == TRACE and _ids(first)[2] == _ids(second)[2]
    assert dict(first.attributes or {})["relay.state"] == "retrying"
    assert dict(second.attributes or {})["relay.state"] == "delivered"
    assert [format_span_id(link.context.span_id) for link in second.links] == [_ids(first)[1]]
    failed = [s for s in _named(spans.get_finished_spans(), "relay.send") if _ids(s)[2] == _ids(first)[1]]
    assert [dict(s.attributes or {}).get("http.response.status_code") for s in failed] == [503]
    assert [dict(s.attributes or {}).get("relay.outcome") for s in failed] == ["transient"]


def test_a_digest_send_links_the_traces_it_carries(
    spans: InMemorySpanExporter, make_runtime: Callable[..., Runtime], sink: HttpSink
) -> None:
    rt = make_runtime(routes=[{"name": "gathered", "channels": ["owners-hook"], "digest": "15m"}])
    parents = [f"00-{n:032x}-{n:016x}-01" for n in (0xA1, 0xB2)]
    with TestClient(create_app(rt)) as client:
        for traceparent in parents:
            payload = sample_notification()
            payload["messages"] = payload["messages"][:1]
            assert post(client, payload, headers={"traceparent": traceparent}).status_code == 202
        run_worker(rt)
        run_scheduled(rt)
        run_worker(rt)
    assert len(sink.at("/owners")) == 1
    [digest] = _named(spans.get_finished_spans(), "relay.digest")
    linked = {format_trace_id(link.context.trace_id) for link in digest.links}
    assert linked == {f"{0xA1:032x}", f"{0xB2:032x}"}
    assert _ids(digest)[0] not in linked  # the digest's send is a trace of its own
    assert dict(digest.attributes or {})["relay.digest.items"] == 2


def test_a_secret_in_any_text_of_a_span_is_scrubbed_on_its_way_out(
    spans: InMemorySpanExporter, tracer: tracing.Tracer, redactor: Redactor
) -> None:
    redactor.add(expand([SECRET]))
    with tracer.span(f"step {SECRET}", **{"url.full": f"https://hooks.example.com/services/{SECRET}"}) as span:
        span.set("error", f"refused: {SECRET}")
    [found] = spans.get_finished_spans()
    assert SECRET not in found.to_json()
    assert dict(found.attributes or {})["url.full"] == "https://hooks.example.com/services/****"


def test_latency_buckets_carry_the_trace_as_an_openmetrics_exemplar(
    spans: InMemorySpanExporter, make_runtime: Callable[..., Runtime]
) -> None:
    rt = make_runtime(routes=[{"channels": ["owners-hook"]}], default={"channels": []})
    payload = sample_notification()
    payload["messages"] = payload["messages"][:1]
    with TestClient(create_app(rt)) as client:
        assert post(client, payload, headers={"traceparent": TRACEPARENT}).status_code == 202
        run_worker(rt)
        openmetrics = client.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        text = client.get("/metrics")
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    exemplified = [line for line in openmetrics.text.splitlines() if f'# {{trace_id="{TRACE}"}}' in line]
    names = {line.split("{", 1)[0] for line in exemplified}
    assert names == {"relay_delivery_latency_seconds_bucket", "relay_send_duration_seconds_bucket"}
    # Each in the bucket its value falls in: the first bound at or above it.
    for line in exemplified:
        bound = line.split('le="', 1)[1].split('"', 1)[0]
        value = float(line.split("} ")[-1].split()[0])
        assert value <= float(bound)
    assert openmetrics.text.rstrip().endswith("# EOF")
    assert "trace_id" not in text.text  # the Prometheus text format has no exemplars


def test_a_replay_days_later_is_in_the_same_trace_and_the_page_links_it(
    spans: InMemorySpanExporter, make_runtime: Callable[..., Runtime], sink: HttpSink
) -> None:
    rt = make_runtime(
        channels={"owners-hook": {"url": sink.url("/refusing")}},
        routes=[{"channels": ["owners-hook"]}],
        default={"channels": []},
        tracing={"ui_url": "http://jaeger.example:16686/trace/{trace_id}"},
    )
    sink.script["/refusing"] = [400]  # permanent: failed at once, kept for a replay
    payload = sample_notification()
    payload["messages"] = payload["messages"][:1]
    event_id = payload["metadata"]["eventId"]
    with TestClient(create_app(rt)) as client:
        assert post(client, payload, headers={"traceparent": TRACEPARENT}).status_code == 202
        run_worker(rt)
        assert admin(client, "/api/v1/deliveries/replay", "POST", json={"eventId": event_id}).json()["replayed"] == 1
        run_worker(rt)
        client.post("/ui/login", data={"token": ADMIN_TOKEN}, follow_redirects=False)
        page = client.get(f"/ui?event={event_id}").text
    first, replayed = sorted(_named(spans.get_finished_spans(), "relay.deliver"), key=lambda s: s.start_time or 0)
    assert _ids(first)[0] == _ids(replayed)[0] == TRACE and _ids(first)[2] == _ids(replayed)[2]
    assert [dict(s.attributes or {})["relay.state"] for s in (first, replayed)] == ["failed", "delivered"]
    assert [format_span_id(link.context.span_id) for link in replayed.links] == [_ids(first)[1]]
    assert f'href="http://jaeger.example:16686/trace/{TRACE}"' in page


def test_a_signed_links_token_and_a_person_in_a_path_never_reach_a_span(
    spans: InMemorySpanExporter, make_runtime: Callable[..., Runtime]
) -> None:
    """A preference or unsubscribe link's token is its person's key: the request's span shows the path masked."""
    from relay.web.links import SCOPE_PREFERENCES, Link, make_token

    secret = "s" * 40
    rt = make_runtime(preferences={"public_url": "https://relay.example.com", "secret": secret})
    token = make_token(secret, Link("user:default/alice.rossi", SCOPE_PREFERENCES, rt.clock()))
    with TestClient(create_app(rt)) as client:
        assert client.get(f"/preferences/{token}?saved=1").status_code == 200
        assert client.get(f"/unsubscribe/{token}x").status_code == 403
        assert admin(client, f"/api/v1/people/{EMAIL}/preferences").status_code == 200
    found = spans.get_finished_spans()
    assert found and all(token not in span.to_json() and EMAIL not in span.to_json() for span in found)
    assert any("/preferences/****" in json.dumps(dict(span.attributes or {})) for span in found)
