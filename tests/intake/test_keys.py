"""Keys built from an eventId: escaped, so that no eventId names a key of another (`X:deliveries` is not the
delivery list of `X`). An accept that fails writes nothing; a key of the wrong type takes down no page."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

import pytest
from redis import Redis
from starlette.testclient import TestClient

from relay.runtime.bootstrap import Runtime
from relay.storage.leases import UNPLANNED
from relay.storage.lists import LISTS, list_key
from relay.storage.records import PREFIX, RECEIVED, event_key
from tests.admin.test_ui import login
from tests.conftest import admin, post, run_worker, sample_notification
from tests.servers import HttpSink


def _post(client: TestClient, event_id: str) -> str:
    payload = sample_notification()
    payload["metadata"]["eventId"] = event_id
    answer = post(client, payload)
    assert answer.status_code == 202, answer.text
    return str(answer.json()["status"])


def _event(client: TestClient, event_id: str) -> Any:
    # Starlette's test client decodes a path twice (uvicorn once): ids with `%` are read from the store.
    assert "%" not in event_id
    return admin(client, "/api/v1/events/" + quote(event_id, safe=""))


def _states(rt: Runtime, event_id: str) -> list[str]:
    assert rt.store.event(event_id) is not None
    return sorted(r.state for r in rt.store.deliveries(rt.store.event_delivery_ids(event_id)) if r is not None)


# The key an event's id is part of: its record (relay:event:<id>). Ids that end with a suffix (`:deliveries`),
# spell an escaped one, or nest the suffix.
LOOKALIKES = ["{x}:deliveries", "{x}%3Adeliveries", "{x}:deliveries:deliveries"]


@pytest.mark.parametrize("shape", LOOKALIKES)
def test_an_event_id_shaped_like_a_key_suffix_is_an_event_of_its_own(
    client: TestClient, rt: Runtime, sink: HttpSink, shape: str
) -> None:
    x = sample_notification()["metadata"]["eventId"]
    other = shape.format(x=x)
    assert _post(client, x) == "accepted"
    run_worker(rt)
    before = _states(rt, x)
    assert before == ["delivered"] * 3
    # After X was delivered: the look-alike is accepted, planned and delivered, and X is left as it was.
    assert _post(client, other) == "accepted"
    run_worker(rt)
    assert _states(rt, other) == before
    assert _states(rt, x) == before
    assert len(sink.at("/owners")) == 2
    assert _post(client, other) == "duplicate"  # the platform's retry
    assert _post(client, x) == "duplicate"


def test_an_event_id_shaped_like_a_key_suffix_posted_first_harms_no_later_event(
    client: TestClient, rt: Runtime, sink: HttpSink
) -> None:
    y = sample_notification()["metadata"]["eventId"]
    assert _post(client, f"{y}:deliveries") == "accepted"
    assert _post(client, y) == "accepted"
    run_worker(rt)
    assert _states(rt, y) == _states(rt, f"{y}:deliveries") == ["delivered"] * 3
    assert len(_event(client, y).json()["deliveries"]) == len(_event(client, f"{y}:deliveries").json()["deliveries"])
    assert login(client).status_code == 303
    assert client.get("/ui").status_code == 200


def test_ids_that_differ_only_by_an_escape_are_two_events(client: TestClient, rt: Runtime) -> None:
    assert _post(client, "a:b") == "accepted"
    assert _post(client, "a%3Ab") == "accepted"
    assert _post(client, "a%253Ab") == "accepted"
    run_worker(rt)
    for event_id in ("a:b", "a%3Ab", "a%253Ab"):
        stored = rt.store.event(event_id)
        assert stored is not None and stored.eventId == event_id
        assert len(rt.store.event_delivery_ids(event_id)) == 3


def test_an_accept_that_fails_part_way_writes_nothing(client: TestClient, rt: Runtime, redis: Redis) -> None:
    """A 503 says nothing was accepted: nothing is written, and the platform's retry is no `duplicate`."""
    event_id = sample_notification()["metadata"]["eventId"]
    redis.set(event_key(event_id), "not a hash")  # a key of the wrong type where the event goes
    payload = sample_notification()
    payload["metadata"]["eventId"] = event_id
    refused = post(client, payload)
    assert refused.status_code == 503
    assert redis.type(event_key(event_id)) == b"string"
    assert not redis.exists(RECEIVED) and redis.zscore(UNPLANNED, event_id) is None
    redis.delete(event_key(event_id))
    assert post(client, payload).json()["status"] == "accepted"  # the retry, once the key is gone


def test_a_key_of_the_wrong_type_takes_down_no_page(
    client: TestClient, rt: Runtime, redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    good, bad, broken = (sample_notification()["metadata"]["eventId"] for _ in range(3))
    for event_id in (good, bad, broken):
        assert _post(client, event_id) == "accepted"
    run_worker(rt)
    # broken's event hash is not one relay wrote; and one delivery listed in the index is a list.
    redis.delete(event_key(broken))
    redis.hset(event_key(broken), "receivedAt", "not a time")
    redis.rpush(f"{PREFIX}delivery:dlist", "x")
    redis.zadd(list_key("delivered", "owners", "x"), {"dlist": time.time() + 60})
    redis.sadd(LISTS, list_key("delivered", "owners", "x"))

    assert len(_event(client, good).json()["deliveries"]) == 3
    assert len(_event(client, bad).json()["deliveries"]) == 3
    assert _event(client, broken).status_code == 404
    listed = admin(client, "/api/v1/deliveries")
    assert listed.status_code == 200 and len(listed.json()) == 9
    assert login(client).status_code == 303
    page = client.get("/ui")
    assert page.status_code == 200 and good in page.text and bad in page.text
    assert client.get(f"/ui?event={broken}").status_code == 200
    assert "event unreadable" in caplog.text
    assert "delivery unreadable" in caplog.text
