"""Silences end to end in process: created through the API, a delivery planned or come due while one matches
is held until it ends (then sent once) or skipped; expiring one early, or `relay release`, lets it go. Real
Redis, RQ and HTTP sink; the clock is the runtime's own (`Runtime.clock`), set by each test."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from relay.core.model import iso
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime, build
from tests.clock import ManualClock
from tests.conftest import admin, post, run_scheduled, run_worker, sample_notification
from tests.servers import HttpSink

pytestmark = pytest.mark.dated

NOW = float(int(time.time()))  # the runtime's clock (whole seconds: times read back as written)
OWNERS = 'channel="owners-hook"'


@pytest.fixture
def silent(rt: Runtime) -> Runtime:
    rt.clock.set(NOW)
    return rt


@pytest.fixture
def api(silent: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(silent)) as client:
        yield client


def _silence(api: TestClient, *matchers: str, **extra: Any) -> dict[str, Any]:
    body = {"matchers": list(matchers) or [OWNERS], "duration": "1h", "createdBy": "ana", "comment": "db move"}
    wanted = {k: v for k, v in {**body, **extra}.items() if v is not None}
    answer = admin(api, "/api/v1/silences", "POST", json=wanted)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def _accept(rt: Runtime, api: TestClient) -> dict[str, dict[str, Any]]:
    payload = sample_notification()
    assert post(api, payload).status_code == 202
    run_worker(rt)
    return _by_channel(api, payload["metadata"]["eventId"])


def _by_channel(api: TestClient, event_id: str) -> dict[str, dict[str, Any]]:
    return {d["channel"]: d for d in admin(api, f"/api/v1/events/{event_id}").json()["deliveries"]}


def _metric(api: TestClient, line: str) -> bool:
    return line in api.get("/metrics").text.splitlines()


def test_held_at_planning_until_the_silence_ends_then_sent_once(
    silent: Runtime, api: TestClient, sink: HttpSink
) -> None:
    silence = _silence(api)
    assert silence["state"] == "active" and silence["action"] == "hold"
    assert silence["endsAt"] == iso(NOW + 3600) and silence["startsAt"] == iso(NOW)
    found = _accept(silent, api)
    owners = found["owners-hook"]
    assert owners["state"] == "held" and owners["notBefore"] == iso(NOW + 3600)
    assert owners["lastError"] == f"silenced by {silence['id']} (ana): db move"
    assert sink.at("/owners") == [] and len(sink.at("/managers")) == 1  # only what matches waits
    # In the held view, with its reason; counted.
    held = admin(api, "/api/v1/deliveries?state=held").json()
    assert [(d["id"], d["lastError"]) for d in held] == [(owners["id"], owners["lastError"])]
    assert _metric(api, 'relay_silenced_total{action="hold"} 1.0')
    assert _metric(api, "relay_silences_active 1.0")
    # A worker woken before the silence ends: the delivery is not due yet, nothing sent, not counted twice.
    silent.clock.set(NOW + 60)
    silent.work.request_wake()
    run_worker(silent)
    assert sink.at("/owners") == []
    assert _by_channel(api, _event(api))["owners-hook"]["state"] == "held"
    assert _metric(api, 'relay_silenced_total{action="hold"} 1.0')
    # The silence over: sent, once, its silence no longer named.
    silent.clock.set(NOW + 3601)
    run_scheduled(silent)
    run_worker(silent)
    assert len(sink.at("/owners")) == 1
    after = admin(api, "/api/v1/deliveries?channel=owners-hook").json()[0]
    assert after["state"] == "delivered" and after["lastError"] is None
    assert _metric(api, "relay_silences_active 0.0")


def _event(api: TestClient) -> str:
    return str(admin(api, "/api/v1/deliveries?channel=owners-hook").json()[0]["eventId"])


def test_skip_ends_it_skipped_with_the_silences_words(silent: Runtime, api: TestClient, sink: HttpSink) -> None:
    silence = _silence(api, 'kind=~"notification:access-control-.*"', OWNERS, action="skip", comment="noisy")
    owners = _accept(silent, api)["owners-hook"]
    assert owners["state"] == "skipped" and owners["lastError"] == f"silenced by {silence['id']}: noisy"
    silent.clock.set(NOW + 7200)
    run_scheduled(silent)
    run_worker(silent)
    assert sink.at("/owners") == []
    assert _metric(api, 'relay_silenced_total{action="skip"} 1.0')


def test_a_silence_on_the_body_that_does_not_match_lets_it_go(silent: Runtime, api: TestClient, sink: HttpSink) -> None:
    _silence(api, OWNERS, 'body.no.such.field="x"')
    assert _accept(silent, api)["owners-hook"]["state"] == "delivered"


def test_expiring_early_releases_what_it_held(silent: Runtime, api: TestClient, sink: HttpSink) -> None:
    silence = _silence(api)
    assert _accept(silent, api)["owners-hook"]["state"] == "held"
    silent.clock.set(NOW + 10)
    answer = admin(api, f"/api/v1/silences/{silence['id']}", "DELETE")
    assert answer.status_code == 200
    assert answer.json()["state"] == "expired" and answer.json()["released"] == 1
    assert answer.json()["endsAt"] == iso(NOW + 10)
    run_worker(silent)  # due at once: no scheduled wake-up needed
    assert len(sink.at("/owners")) == 1
    assert admin(api, "/api/v1/silences/nope", "DELETE").status_code == 404
    # Expiring again changes nothing.
    again = admin(api, f"/api/v1/silences/{silence['id']}", "DELETE").json()
    assert again["endsAt"] == iso(NOW + 10) and again["released"] == 0


def test_release_sends_a_silenced_delivery(silent: Runtime, api: TestClient, sink: HttpSink) -> None:
    _silence(api)
    assert _accept(silent, api)["owners-hook"]["state"] == "held"
    answer = admin(api, "/api/v1/deliveries/release", "POST", json={"channel": "owners-hook"})
    assert answer.json()["released"] == 1
    run_worker(silent)
    assert len(sink.at("/owners")) == 1


def test_a_retry_that_comes_due_under_a_silence_waits(silent: Runtime, api: TestClient, sink: HttpSink) -> None:
    sink.script["/owners"] = [503]
    owners = _accept(silent, api)["owners-hook"]
    assert owners["state"] == "retrying"
    silence = _silence(api)
    run_scheduled(silent)
    run_worker(silent)
    after = admin(api, "/api/v1/deliveries?channel=owners-hook").json()[0]
    assert after["state"] == "held" and after["lastError"].startswith(f"silenced by {silence['id']} ")
    assert after["attempts"] == 1 and sink.at("/owners") == []
    silent.clock.set(NOW + 3601)
    run_scheduled(silent)
    run_worker(silent)
    assert len(sink.at("/owners")) == 1


def test_pending_then_active_and_listed_by_state(silent: Runtime, api: TestClient, sink: HttpSink) -> None:
    later = _silence(api, startsAt=iso(NOW + 600), endsAt=iso(NOW + 1200), duration=None)
    assert later["state"] == "pending"
    # Pending: nothing held yet.
    assert _accept(silent, api)["owners-hook"]["state"] == "delivered"
    now = _silence(api, 'kind="x"', duration="5m")

    def ids(query: str) -> list[str]:
        answer = admin(api, f"/api/v1/silences{query}")
        assert answer.status_code == 200
        return [s["id"] for s in answer.json()["silences"]]

    assert ids("") == [now["id"], later["id"]]  # oldest start first
    assert ids("?state=pending") == [later["id"]]
    assert ids("?state=active,pending") == [now["id"], later["id"]]
    silent.clock.set(NOW + 900)
    assert ids("?state=active") == [later["id"]] and ids("?state=expired") == [now["id"]]
    assert admin(api, "/api/v1/silences?state=gone").json()["inputErrorField"] == "state"


def test_silences_survive_a_restart(
    silent: Runtime, api: TestClient, make_runtime: Callable[..., Runtime], sink: HttpSink
) -> None:
    silence = _silence(api)
    again = build(silent.config, silent.redis, clock=ManualClock(NOW))
    with TestClient(create_app(again)) as other:
        listed = admin(other, "/api/v1/silences?state=active").json()["silences"]
    assert [s["id"] for s in listed] == [silence["id"]]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"comment": ""}, "comment"),
        ({"createdBy": None}, "createdBy"),
        ({"matchers": []}, "matchers"),
        ({"matchers": ['kind=~"("']}, "matchers"),
        ({"matchers": ['nope="x"']}, "matchers"),
        ({"matchers": ["{}"]}, "matchers"),
        ({"duration": "soon"}, "duration"),
        ({"duration": None}, "endsAt"),
        ({"endsAt": "2020-01-01T00:00:00Z"}, "endsAt"),
        ({"duration": None, "endsAt": "2020-01-01T00:00:00Z"}, "endsAt"),
        ({"action": "drop"}, "action"),
        ({"duration": "99999999w"}, "endsAt"),
        ({"color": "red"}, "color"),
    ],
)
def test_a_bad_silence_is_refused_with_its_field(api: TestClient, body: dict[str, Any], field: str) -> None:
    base = {"matchers": [OWNERS], "duration": "1h", "createdBy": "ana", "comment": "x"}
    wanted = {k: v for k, v in {**base, **body}.items() if v is not None}
    answer = admin(api, "/api/v1/silences", "POST", json=wanted)
    assert answer.status_code == 422, answer.text
    error = answer.json()
    assert error["inputErrorField"] == field and error["userMessage"] and error["moreInfo"]["problems"]
    assert admin(api, "/api/v1/silences").json() == {"silences": []}


def test_admin_credentials_are_needed(api: TestClient) -> None:
    assert api.get("/api/v1/silences").status_code == 401
    assert api.post("/api/v1/silences", json={}).status_code == 401
    assert api.delete("/api/v1/silences/x").status_code == 401
