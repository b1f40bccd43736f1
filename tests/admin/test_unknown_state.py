"""A delivery stored in a state this relay does not know (a newer relay's, or written by hand): every listing
still answers, without it, and no worker or replay touches it."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from relay.core.model import State
from relay.runtime.bootstrap import Runtime
from relay.storage.records import STORED, UnknownState, delivery_from_hash, delivery_to_hash
from relay.storage.store import delivery_key
from tests.conftest import ADMIN_TOKEN, admin, post, run_worker, sample_notification
from tests.servers import HttpSink


def test_a_stored_state_is_read_as_the_enum() -> None:
    record = delivery_from_hash({STORED["eventId"]: "e1", STORED["state"]: "held"}, "d1")
    assert record.state is State.HELD
    assert delivery_to_hash(record)[STORED["state"]] == "held"
    assert delivery_from_hash({STORED["eventId"]: "e1"}, "d1").state is State.QUEUED  # none stored


def test_an_unknown_stored_state_is_a_clear_error() -> None:
    with pytest.raises(UnknownState, match="delivery d1 has a state this relay does not know: 'paused'"):
        delivery_from_hash({STORED["eventId"]: "e1", STORED["state"]: "paused"}, "d1")


@pytest.fixture
def unknown(rt: Runtime, client: TestClient, sink: HttpSink) -> tuple[str, str]:
    """A notification whose owners' delivery failed, then was stored as `paused`; its eventId and that id."""
    sink.script["/owners"] = [404]
    payload = sample_notification()
    assert post(client, payload).status_code == 202
    run_worker(rt)
    event_id = payload["metadata"]["eventId"]
    records = [r for r in rt.store.deliveries(rt.store.event_delivery_ids(event_id)) if r is not None]
    [failed] = [r for r in records if r.state is State.FAILED]
    rt.redis.hset(delivery_key(failed.id), STORED["state"], "paused")
    return event_id, failed.id


def test_listings_answer_without_a_delivery_in_an_unknown_state(
    rt: Runtime, client: TestClient, unknown: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    event_id, ident = unknown
    event = admin(client, f"/api/v1/events/{event_id}")
    assert event.status_code == 200
    shown = {d["id"]: d["state"] for d in event.json()["deliveries"]}
    assert ident not in shown and set(shown.values()) == {"delivered"} and len(shown) == 2
    for query in ("", "?state=failed", f"?eventId={event_id}"):
        listed = admin(client, f"/api/v1/deliveries{query}")
        assert listed.status_code == 200, query
        assert ident not in {d["id"] for d in listed.json()}
    assert rt.store.delivery(ident) is None
    assert client.post("/ui/login", data={"token": ADMIN_TOKEN}, follow_redirects=False).status_code == 303
    page = client.get(f"/ui?event={event_id}")
    assert page.status_code == 200 and ident not in page.text and event_id in page.text
    assert f"delivery {ident} has a state this relay does not know: 'paused'" in caplog.text


def test_a_delivery_in_an_unknown_state_is_left_as_it_is(
    rt: Runtime, client: TestClient, unknown: tuple[str, str]
) -> None:
    _, ident = unknown
    replayed = admin(client, "/api/v1/deliveries/replay", "POST", json={"ids": [ident]})
    assert replayed.status_code == 200
    assert replayed.json() == {"replayed": 0, "dryRun": False, "notReplayed": [{"id": ident, "state": "unknown"}]}
    rt.work.enqueue_deliveries([ident])  # a job for it, as a newer relay may have queued
    run_worker(rt)
    assert rt.redis.hget(delivery_key(ident), STORED["state"]) == b"paused"
    assert rt.redis.hget(delivery_key(ident), STORED["attempts"]) == b"1"
