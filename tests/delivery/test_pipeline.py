"""End to end in one process: webhook -> Redis -> real RQ worker -> real SMTP and HTTP sinks -> records."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from starlette.testclient import TestClient

from relay.admin.selection import Filters
from relay.core.model import State
from relay.runtime.bootstrap import Runtime
from relay.storage.leases import LEASES, READY
from relay.storage.requeue import replay
from relay.storage.work_queue import QUEUE_NAME
from tests.conftest import admin, post, run_scheduled, run_worker, sample_notification
from tests.servers import HttpSink, SmtpSink

pytestmark = pytest.mark.dated


def _by_channel(event: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for d in event["deliveries"]:
        out.setdefault(d["channel"], []).append(d)
    return out


def test_sample_notification_reaches_every_channel_and_is_recorded(
    client: TestClient, rt: Runtime, sink: HttpSink, smtp: SmtpSink
) -> None:
    payload = sample_notification()
    answer = post(client, payload)
    assert answer.status_code == 202
    assert answer.json() == {"eventId": payload["metadata"]["eventId"], "status": "accepted"}

    run_worker(rt)

    owners = sink.at("/owners")
    assert [h.json()["title"] for h in owners] == ["Access request failed"]
    assert owners[0].json()["message"] == payload["messages"][0]["message"]
    managers = sink.at("/managers")
    assert [h.json()["title"] for h in managers] == ["Access request failed in a project you manage"]
    assert sink.at("/audit") == []

    assert len(smtp.mails) == 1
    mail = smtp.mails[0]
    assert mail.envelope_to == ["alice.rossi@example.com"]
    assert mail.subject == "Your access request failed"
    html = mail.part("text/html") or ""
    assert "Contact the system owner, Bruno Verdi." in html

    event = admin(client, f"/api/v1/events/{payload['metadata']['eventId']}").json()
    assert event["eventId"] == payload["metadata"]["eventId"]
    assert event["kind"] == "notification:access-control-request-failed"
    assert event["receivedAt"].endswith("Z")
    channels = _by_channel(event)
    assert [d["state"] for d in channels["owners-hook"]] == ["delivered"]
    assert channels["owners-hook"][0]["recipientType"] == "recipient-type:system-owner"
    assert channels["owners-hook"][0]["recipient"] is None
    assert channels["owners-hook"][0]["attempts"] == 1
    assert channels["requester-email"][0]["recipient"] == "user:default/alice.rossi"
    assert channels["requester-email"][0]["state"] == "delivered"
    # v2 type project-data-access-manager is routed, so it wins over the legacy system-owner.
    assert channels["managers-hook"][0]["recipientType"] == "recipient-type:project-data-access-manager"
    for d in event["deliveries"]:
        assert set(d) >= {
            "id",
            "recipientType",
            "recipient",
            "channel",
            "state",
            "attempts",
            "lastError",
            "createdAt",
            "updatedAt",
        }


def test_duplicate_event_is_answered_and_sent_once(client: TestClient, rt: Runtime, sink: HttpSink) -> None:
    payload = sample_notification()
    assert post(client, payload).json()["status"] == "accepted"
    again = post(client, payload)
    assert again.status_code == 202
    assert again.json() == {"eventId": payload["metadata"]["eventId"], "status": "duplicate"}
    run_worker(rt)
    assert len(sink.at("/owners")) == 1


def test_recipient_without_address_is_skipped_and_others_go_out(
    make_runtime: Any, sink: HttpSink, smtp: SmtpSink
) -> None:
    from relay.runtime.app import create_app

    rt = make_runtime(routes=[{"channels": ["requester-email", "owners-hook"]}])
    payload = sample_notification()
    with TestClient(create_app(rt)) as client:
        assert post(client, payload).status_code == 202
        run_worker(rt)
        event = admin(client, f"/api/v1/events/{payload['metadata']['eventId']}").json()
    emails = sorted(d["recipient"] or "" for d in event["deliveries"] if d["channel"] == "requester-email")
    assert emails == ["", "user:default/alice.rossi", "user:default/bruno.verdi", "user:default/carla.neri"]
    skipped = [d for d in event["deliveries"] if d["state"] == "skipped"]
    assert len(skipped) == 2
    assert all("no e-mail address" in d["lastError"] for d in skipped)
    assert sorted(m.envelope_to[0] for m in smtp.mails) == ["alice.rossi@example.com", "bruno.verdi@example.com"]
    # The audience channel gets each of the three messages once.
    assert len(sink.at("/owners")) == 3


def test_unknown_kind_uses_platform_text_verbatim_on_default_route(
    client: TestClient, rt: Runtime, sink: HttpSink
) -> None:
    payload = sample_notification(
        kind="notification:something-new",
        messages=[
            {
                "recipientType": "recipient-type:brand-new",
                "recipients": [],
                "title": "Hello {{ not_a_template }}",
                "message": "Line one\nLine <two> & {% raw %}",
            }
        ],
    )
    assert post(client, payload).status_code == 202
    run_worker(rt)
    hits = sink.at("/audit")
    assert len(hits) == 1
    assert hits[0].json()["title"] == "Hello {{ not_a_template }}"
    assert hits[0].json()["message"] == "Line one\nLine <two> & {% raw %}"


def test_transient_failure_is_retried_then_delivered(client: TestClient, rt: Runtime, sink: HttpSink) -> None:
    sink.script["/owners"] = [503]
    payload = sample_notification()
    post(client, payload)
    run_worker(rt)
    event = admin(client, f"/api/v1/events/{payload['metadata']['eventId']}").json()
    owners = next(d for d in event["deliveries"] if d["channel"] == "owners-hook")
    assert owners["state"] == "retrying"
    assert "503" in owners["lastError"]
    assert run_scheduled(rt) == 1
    run_worker(rt)
    event = admin(client, f"/api/v1/events/{payload['metadata']['eventId']}").json()
    owners = next(d for d in event["deliveries"] if d["channel"] == "owners-hook")
    assert owners["state"] == "delivered"
    assert owners["attempts"] == 2
    assert len(sink.at("/owners")) == 1


def test_permanent_failure_fails_at_once_and_replay_delivers_once(
    client: TestClient, rt: Runtime, sink: HttpSink
) -> None:
    sink.script["/owners"] = [404]
    payload = sample_notification()
    event_id = payload["metadata"]["eventId"]
    post(client, payload)
    run_worker(rt)
    failed = admin(client, "/api/v1/deliveries?state=failed").json()
    assert [d["channel"] for d in failed] == ["owners-hook"]
    assert failed[0]["attempts"] == 1 and "404" in failed[0]["lastError"]
    assert failed[0]["eventId"] == event_id and failed[0]["kind"] == payload["kind"]

    answer = admin(client, "/api/v1/deliveries/replay", "POST", json={"eventId": event_id})
    assert answer.status_code == 200 and answer.json()["replayed"] == 1
    run_worker(rt)
    assert len(sink.at("/owners")) == 1
    # A second replay finds nothing failed, and a delivered delivery is never sent again.
    again = admin(client, "/api/v1/deliveries/replay", "POST", json={"ids": [failed[0]["id"]]})
    assert again.json()["replayed"] == 0
    assert again.json()["notReplayed"] == [{"id": failed[0]["id"], "state": "delivered"}]
    run_worker(rt)
    assert len(sink.at("/owners")) == 1


def test_retries_exhausted_mark_failed(client: TestClient, rt: Runtime, sink: HttpSink) -> None:
    sink.script["/owners"] = [500, 500, 500, 500]
    payload = sample_notification()
    post(client, payload)
    run_worker(rt)
    while run_scheduled(rt):
        run_worker(rt)
    event = admin(client, f"/api/v1/events/{payload['metadata']['eventId']}").json()
    owners = next(d for d in event["deliveries"] if d["channel"] == "owners-hook")
    assert owners["state"] == "failed"
    assert owners["attempts"] == 3  # retry.attempts in the test config
    assert sink.at("/owners") == []


def test_many_notifications_each_delivered_once(client: TestClient, rt: Runtime, sink: HttpSink) -> None:
    ids = []
    for _ in range(30):
        payload = sample_notification()
        payload["metadata"] = {"eventId": str(uuid.uuid4()), "createdAt": "2026-11-20T09:14:05.002Z"}
        ids.append(payload["metadata"]["eventId"])
        assert post(client, payload).status_code == 202
    run_worker(rt)
    assert len(sink.at("/owners")) == 30
    listing = admin(client, "/api/v1/deliveries?channel=owners-hook&limit=500").json()
    assert len(listing) == 30 and {d["eventId"] for d in listing} == set(ids)
    assert all(d["state"] == "delivered" for d in listing)


def test_null_recipients_still_reach_audience_channels(client: TestClient, rt: Runtime, sink: HttpSink) -> None:
    message = {**sample_notification()["messages"][0], "recipients": None}
    payload = sample_notification(messages=[message])
    assert post(client, payload).status_code == 202
    run_worker(rt)
    assert [h.json()["title"] for h in sink.at("/owners")] == ["Access request failed"]


def test_planning_an_event_again_creates_and_sends_nothing_twice(
    client: TestClient, rt: Runtime, sink: HttpSink
) -> None:
    from relay.storage.store import event_key
    from tests.conftest import plan_job

    payload = sample_notification()
    event_id = payload["metadata"]["eventId"]
    assert post(client, payload).json()["status"] == "accepted"
    run_worker(rt)
    sent = len(sink.hits)
    ids = rt.store.event_delivery_ids(event_id)
    # What a worker killed after planning, whose planning job RQ runs again, would do.
    plan_job(rt, event_id)
    run_worker(rt)
    assert len(sink.hits) == sent
    assert rt.store.event_delivery_ids(event_id) == ids == list(dict.fromkeys(ids))
    # The event's record lists each once: the second planning created nothing, so it added no id.
    assert rt.redis.hget(event_key(event_id), "deliveries") == " ".join(ids).encode()
    assert rt.redis.hget(event_key(event_id), "parts") is None
    # No send lock is left behind by planning (locks taken with the records are released).
    assert not list(rt.redis.scan_iter("relay:lock:*"))


def test_planning_sends_its_first_deliveries_with_the_leases_it_took(
    client: TestClient, rt: Runtime, sink: HttpSink
) -> None:
    payload = sample_notification()
    assert post(client, payload).json()["status"] == "accepted"
    run_worker(rt)
    event = admin(client, f"/api/v1/events/{payload['metadata']['eventId']}").json()
    states = {d["state"] for d in event["deliveries"]}
    assert states <= {"delivered", "skipped"} and "delivered" in states
    assert rt.redis.hlen(LEASES) == 0 and rt.redis.zcard(READY) == 0  # sent by its planner: none due later


def test_a_notification_with_one_failing_channel_leaves_no_lease_and_counts_each_state(
    client: TestClient, rt: Runtime, sink: HttpSink
) -> None:
    """Its deliveries are sent beside each other; the one that failed is stored with its retry scheduled,
    the others as delivered; every lease is let go, and the counters say the same."""
    from rq.registry import ScheduledJobRegistry

    before = rt.store.counters()
    sink.script["/managers"] = [503]
    payload = sample_notification()
    assert post(client, payload).json()["status"] == "accepted"
    run_worker(rt)
    event = admin(client, f"/api/v1/events/{payload['metadata']['eventId']}").json()
    states = sorted(d["state"] for d in event["deliveries"])
    assert states.count("retrying") == 1 and states.count("delivered") >= 2
    delivered = states.count("delivered")
    assert ScheduledJobRegistry(QUEUE_NAME, connection=rt.redis).count == 1  # the retry's wake-up, waiting
    assert rt.redis.zcard(READY) == 1  # the retry, due later
    assert rt.redis.hlen(LEASES) == 0
    after = rt.store.counters()
    counted_delivered = [k for k in after if k.startswith("relay_deliveries_total|") and "state=delivered" in k]
    assert sum(after[k] - before.get(k, 0) for k in counted_delivered) == delivered


def test_a_delivery_records_the_template_it_was_rendered_with_as_preview_names_it(
    client: TestClient, rt: Runtime, sink: HttpSink
) -> None:
    """`template: auto` is resolved when rendered: the record says which template that was."""
    from relay.cli.preview import preview_plan

    payload = sample_notification()
    assert post(client, payload).json()["status"] == "accepted"
    run_worker(rt)
    event = admin(client, f"/api/v1/events/{payload['metadata']['eventId']}").json()
    planned = {item["channel"]: item["template"] for item in preview_plan(rt.config, payload, clock=rt.clock)}
    delivered = [d for d in event["deliveries"] if d["state"] == "delivered"]
    assert delivered
    for d in delivered:
        assert d["template"] != "auto" and d["template"] == planned[d["channel"]]


def test_a_replay_from_a_listing_read_before_the_delivery_went_out_sends_nothing_again(
    client: TestClient, rt: Runtime, sink: HttpSink
) -> None:
    """Two replays overlap (a double click): the second's records were read while the delivery was failed;
    it reads it again under a lease and finds it delivered, so it is not made due again."""
    sink.script["/owners"] = [404]
    payload = sample_notification()
    post(client, payload)
    run_worker(rt)
    stale = Filters(State.FAILED).page(rt.store, 50)[0]
    assert len(stale) == 1
    assert replay(rt.work, stale, 3) == 1
    run_worker(rt)
    assert len(sink.at("/owners")) == 1
    assert replay(rt.work, stale, 3) == 0  # the stale copy says failed; the record says delivered
    run_worker(rt)
    assert len(sink.at("/owners")) == 1
    assert rt.store.delivery(stale[0].id).state == "delivered"  # type: ignore[union-attr]
