"""Every answer of the webhook and the admin API, with the platform's error body on every 4xx and 5xx."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from redis import Redis
from starlette.testclient import TestClient

from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime, build
from tests.conftest import ADMIN_TOKEN, WEBHOOK_TOKEN, admin, base_config, post, run_worker, sample_notification
from tests.servers import HttpSink, SmtpSink, free_port


def assert_error_body(answer: Any, status: int) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    body = answer.json()
    assert isinstance(body["errors"], list) and body["errors"] and all(isinstance(e, str) for e in body["errors"])
    assert isinstance(body["userMessage"], str) and body["userMessage"]
    assert isinstance(body["moreInfo"]["problems"], list)
    assert isinstance(body["moreInfo"]["solutions"], list)
    return dict(body)


def raw_post(client: TestClient, body: bytes, content_type: str = "application/json", **headers: str) -> Any:
    return client.post(
        "/webhook",
        content=body,
        headers={"Authorization": f"Bearer {WEBHOOK_TOKEN}", "Content-Type": content_type, **headers},
    )


# -- authentication ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Basic {WEBHOOK_TOKEN}"},
        {"Authorization": WEBHOOK_TOKEN},
        {"X-Relay-Token": "nope"},
    ],
)
def test_webhook_refuses_missing_or_bad_credentials(client: TestClient, headers: dict[str, str]) -> None:
    answer = client.post("/webhook", json=sample_notification(), headers=headers)
    body = assert_error_body(answer, 401)
    assert "token" not in body["errors"][0].lower() or WEBHOOK_TOKEN not in json.dumps(body)


def test_webhook_accepts_token_in_custom_header(client: TestClient) -> None:
    answer = client.post("/webhook", json=sample_notification(), headers={"X-Relay-Token": WEBHOOK_TOKEN})
    assert answer.status_code == 202


def test_webhook_accepts_basic_auth(make_runtime: Any) -> None:
    rt = make_runtime(server={"auth": {"basic": {"username": "platform", "password": "s3cret-pass"}}})
    good = base64.b64encode(b"platform:s3cret-pass").decode()
    bad = base64.b64encode(b"platform:wrong").decode()
    with TestClient(create_app(rt)) as client:
        ok = client.post("/webhook", json=sample_notification(), headers={"Authorization": f"Basic {good}"})
        assert ok.status_code == 202
        assert_error_body(
            client.post("/webhook", json=sample_notification(), headers={"Authorization": f"Basic {bad}"}), 401
        )


def test_rotation_accepts_every_configured_token(make_runtime: Any) -> None:
    rt = make_runtime(server={"auth": {"tokens": ["old-token-aaaa", "new-token-bbbb"]}})
    with TestClient(create_app(rt)) as client:
        for token in ("old-token-aaaa", "new-token-bbbb"):
            assert post(client, sample_notification(), token=token).status_code == 202


# -- body checks -------------------------------------------------------------------------------


def test_bad_json_is_400(client: TestClient) -> None:
    body = assert_error_body(raw_post(client, b'{"kind": '), 400)
    assert "JSON" in body["errors"][0]


@pytest.mark.parametrize("raw", [b"", b"not json", b"{'single': 'quotes'}", b'{"a": NaN}', b"\xff\xfe"])
def test_unparseable_bodies_are_400(client: TestClient, raw: bytes) -> None:
    assert_error_body(raw_post(client, raw), 400)


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml"])
def test_non_json_content_type_is_415(client: TestClient, content_type: str) -> None:
    assert_error_body(raw_post(client, json.dumps(sample_notification()).encode(), content_type), 415)


def test_json_with_charset_is_accepted(client: TestClient) -> None:
    answer = raw_post(client, json.dumps(sample_notification()).encode(), "application/json; charset=utf-8")
    assert answer.status_code == 202


def _padded(size: int) -> bytes:
    payload = sample_notification()
    payload["body"]["padding"] = ""
    base = len(json.dumps(payload).encode())
    payload["body"]["padding"] = "x" * (size - base)
    raw = json.dumps(payload).encode()
    assert len(raw) == size
    return raw


def test_body_of_exactly_the_limit_is_accepted_one_more_byte_is_413(make_runtime: Any) -> None:
    rt = make_runtime(server={"auth": {"tokens": [WEBHOOK_TOKEN]}, "max_body_bytes": 4096})
    with TestClient(create_app(rt)) as client:
        assert raw_post(client, _padded(4096)).status_code == 202
        body = assert_error_body(raw_post(client, _padded(4097)), 413)
        assert "4096" in body["errors"][0]


def test_default_limit_is_one_mebibyte(client: TestClient) -> None:
    assert raw_post(client, _padded(1_048_576)).status_code == 202
    assert_error_body(raw_post(client, _padded(1_048_577)), 413)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda p: p.pop("kind"), "kind"),
        (lambda p: p.update(kind=""), "kind"),
        (lambda p: p.update(kind=42), "kind"),
        (lambda p: p.pop("messages"), "messages"),
        (lambda p: p.update(messages={"not": "a list"}), "messages"),
        (lambda p: p.update(body="text"), "body"),
        (lambda p: p.pop("metadata"), "metadata"),
        (lambda p: p["metadata"].pop("eventId"), "metadata.eventId"),
        (lambda p: p["metadata"].update(eventId=""), "metadata.eventId"),
        (lambda p: p["metadata"].update(eventId=123), "metadata.eventId"),
        (lambda p: p["messages"][1].update(recipients="alice"), "messages.1.recipients"),
        (lambda p: p["messages"][0].update(title=["a"]), "messages.0.title"),
        (lambda p: p.pop("sender"), "sender"),
    ],
)
def test_schema_violations_are_422_with_the_field(client: TestClient, mutate: Any, field: str) -> None:
    payload = sample_notification()
    mutate(payload)
    body = assert_error_body(post(client, payload), 422)
    assert body["inputErrorField"] == field
    assert any(field in p for p in body["moreInfo"]["problems"])


@pytest.mark.parametrize("raw", [b"[]", b'"text"', b"42", b"null"])
def test_non_object_json_is_422(client: TestClient, raw: bytes) -> None:
    assert_error_body(raw_post(client, raw), 422)


def test_unknown_fields_are_accepted_and_kept(client: TestClient, rt: Runtime) -> None:
    payload = sample_notification()
    payload["newTopLevel"] = {"x": 1}
    payload["messages"][0]["priority"] = "high"
    payload["metadata"]["traceId"] = "abc"
    assert post(client, payload).status_code == 202
    stored = rt.store.event(payload["metadata"]["eventId"])
    assert stored is not None
    kept = json.loads(stored.payload)
    assert kept["newTopLevel"] == {"x": 1} and kept["messages"][0]["priority"] == "high"


def test_empty_messages_are_accepted(client: TestClient, rt: Runtime) -> None:
    payload = sample_notification(messages=[])
    assert post(client, payload).status_code == 202
    run_worker(rt)
    assert admin(client, f"/api/v1/events/{payload['metadata']['eventId']}").json()["deliveries"] == []


# -- Redis down: 503, nothing half-accepted ---------------------------------------------------


def test_redis_unreachable_is_503_with_retry_after(sink: HttpSink, smtp: SmtpSink, tmp_path: Path) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    config = base_config(sink, smtp, tmp_path, dead)
    rt = build(config, Redis.from_url(dead, socket_connect_timeout=0.5, socket_timeout=0.5))
    with TestClient(create_app(rt)) as client:
        answer = post(client, sample_notification())
        body = assert_error_body(answer, 503)
        assert answer.headers["Retry-After"].isdigit()
        assert "nothing was accepted" in body["errors"][0]
        assert client.get("/healthz").status_code == 200
        assert_error_body(client.get("/readyz"), 503)
        assert "relay_up 0" in client.get("/metrics").text


# -- health, metrics, openapi, unknown paths ---------------------------------------------------


def test_readyz_needs_a_worker_heartbeat(client: TestClient, rt: Runtime) -> None:
    assert_error_body(client.get("/readyz"), 503)
    rt.store.heartbeat("test-worker")
    answer = client.get("/readyz")
    assert answer.status_code == 200 and answer.json()["workers"] == 1


def test_metrics_count_received_duplicates_and_deliveries(client: TestClient, rt: Runtime) -> None:
    payload = sample_notification()
    post(client, payload)
    post(client, payload)
    post(client, {"kind": "x"})
    run_worker(rt)
    text = client.get("/metrics").text
    assert 'relay_notifications_received_total{kind="notification:access-control-request-failed"} 1' in text
    assert "relay_notifications_duplicate_total 1" in text
    assert 'relay_notifications_rejected_total{reason="schema",status="422"} 1' in text
    assert (
        'relay_deliveries_total{channel="owners-hook",kind="notification:access-control-request-failed",'
        'state="delivered"} 1' in text
    )
    assert "# TYPE relay_delivery_latency_seconds histogram" in text
    assert 'relay_delivery_latency_seconds_bucket{le="+Inf"} 3' in text
    assert "relay_delivery_latency_seconds_count 3" in text
    assert 'relay_send_duration_seconds_bucket{channel="owners-hook",le="+Inf"} 1' in text
    assert WEBHOOK_TOKEN not in text


def test_openapi_describes_the_endpoints(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    for path in (
        "/webhook",
        "/healthz",
        "/readyz",
        "/metrics",
        "/api/v1/events/{eventId}",
        "/api/v1/deliveries",
        "/api/v1/deliveries/replay",
    ):
        assert path in doc["paths"]


def test_unknown_path_and_wrong_method_answer_error_bodies(client: TestClient) -> None:
    assert_error_body(client.get("/nope"), 404)
    assert_error_body(client.get("/webhook"), 405)


def test_webhook_path_is_configurable(make_runtime: Any) -> None:
    rt = make_runtime(server={"auth": {"tokens": [WEBHOOK_TOKEN]}, "path": "/hooks/platform"})
    with TestClient(create_app(rt)) as client:
        ok = client.post(
            "/hooks/platform", json=sample_notification(), headers={"Authorization": f"Bearer {WEBHOOK_TOKEN}"}
        )
        assert ok.status_code == 202
        assert client.post("/webhook", json=sample_notification()).status_code == 404


# -- admin API -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/api/v1/events/x", "/api/v1/deliveries"])
def test_admin_api_needs_admin_token_not_webhook_token(client: TestClient, path: str) -> None:
    assert_error_body(client.get(path), 401)
    assert_error_body(client.get(path, headers={"Authorization": f"Bearer {WEBHOOK_TOKEN}"}), 401)
    assert client.get(path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).status_code in (200, 404)


def test_replay_needs_admin_token(client: TestClient) -> None:
    assert_error_body(client.post("/api/v1/deliveries/replay", json={}), 401)


def test_unknown_event_is_404(client: TestClient) -> None:
    body = assert_error_body(admin(client, "/api/v1/events/does-not-exist"), 404)
    assert body["inputErrorField"] == "eventId"


def test_event_ids_with_slashes_and_unicode(client: TestClient, rt: Runtime) -> None:
    payload = sample_notification()
    payload["metadata"]["eventId"] = "tenant/a:ü-1"
    assert post(client, payload).status_code == 202
    answer = admin(client, "/api/v1/events/tenant/a:%C3%BC-1")
    assert answer.status_code == 200 and answer.json()["eventId"] == "tenant/a:ü-1"


@pytest.mark.parametrize("query", ["state=done", "limit=abc", "limit=0", "since=yesterday"])
def test_bad_listing_queries_are_422(client: TestClient, query: str) -> None:
    assert_error_body(admin(client, f"/api/v1/deliveries?{query}"), 422)


def test_listing_filters_and_limit(client: TestClient, rt: Runtime) -> None:
    for _ in range(3):
        post(client, sample_notification())
    post(client, sample_notification(kind="notification:other"))
    run_worker(rt)
    everything = admin(client, "/api/v1/deliveries?limit=500").json()
    assert len(everything) == 12
    stamps = [d["createdAt"] for d in everything]
    assert stamps == sorted(stamps, reverse=True)
    assert len(admin(client, "/api/v1/deliveries?limit=2").json()) == 2
    other = admin(client, "/api/v1/deliveries?kind=notification:other").json()
    # Route 1 names access-control kinds only: the other kind's system owner falls to the default route.
    assert sorted(d["channel"] for d in other) == ["audit-hook", "managers-hook", "requester-email"]
    email = admin(client, "/api/v1/deliveries?channel=requester-email&state=delivered").json()
    assert len(email) == 4
    assert len(admin(client, "/api/v1/deliveries?since=1h").json()) == 12


@pytest.mark.parametrize("body", [b"[1]", b'{"ids": "abc"}', b'{"eventId": 5}', b"{bad"])
def test_bad_replay_bodies_are_rejected(client: TestClient, body: bytes) -> None:
    answer = client.post(
        "/api/v1/deliveries/replay",
        content=body,
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"},
    )
    assert answer.status_code in (400, 422)
    assert_error_body(answer, answer.status_code)


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_replay_refuses_form_posts(client: TestClient, content_type: str) -> None:
    answer = client.post(
        "/api/v1/deliveries/replay",
        content=b"ids=x",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": content_type},
    )
    assert_error_body(answer, 415)


def test_replay_with_no_body_and_no_content_type_is_fine(client: TestClient) -> None:
    answer = client.post("/api/v1/deliveries/replay", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert answer.status_code == 200 and answer.json()["replayed"] == 0
