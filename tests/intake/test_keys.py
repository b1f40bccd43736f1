"""Keys built from an eventId: escaped, so that no eventId names a key of another (`X:deliveries` is not the
delivery list of `X`), and read where an earlier relay, which embedded the id raw, stored them. An accept
that fails writes nothing (no dedup key without its event); a key of the wrong type takes down no page."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote

import pytest
from redis import Redis
from starlette.testclient import TestClient

from relay.runtime.bootstrap import Runtime
from relay.storage.leases import UNPLANNED
from relay.storage.lists import LISTS, list_key
from relay.storage.records import DELIVERIES, EVENTS, PREFIX, RECEIVED, dedup_key, event_deliveries_key, event_key
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


# Every key an event's id is part of: its record (relay:event:<id>), and, as an earlier relay kept them, its
# delivery list (relay:event:<id>:deliveries) and its dedup key (relay:dedup:<id>). `:deliveries` is the one
# suffix among relay's keys; the others are ids that spell an escaped one, or nest the suffix.
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


def test_an_accept_that_fails_part_way_leaves_no_dedup_key(client: TestClient, rt: Runtime, redis: Redis) -> None:
    """Before, the dedup key was written first and the event's write then failed: a 503 saying nothing was
    accepted, and the platform's retry answered `duplicate`: the notification lost."""
    event_id = sample_notification()["metadata"]["eventId"]
    redis.set(event_key(event_id), "not a hash")  # a key of the wrong type where the event goes
    payload = sample_notification()
    payload["metadata"]["eventId"] = event_id
    refused = post(client, payload)
    assert refused.status_code == 503
    assert redis.type(event_key(event_id)) == b"string" and not redis.exists(dedup_key(event_id))
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
    # bad's delivery list as an earlier relay kept it is a string; broken's event hash is not one relay wrote;
    # and one delivery listed in the index is a list.
    redis.set(event_deliveries_key(bad), "garbage")
    redis.delete(event_key(broken))
    redis.hset(event_key(broken), "receivedAt", "not a time")
    redis.rpush(f"{PREFIX}delivery:dlist", "x")
    redis.zadd(list_key("delivered", "owners", "x"), {"dlist": time.time() + 60})
    redis.sadd(LISTS, list_key("delivered", "owners", "x"))
    redis.zadd(DELIVERIES, {"dlist": time.time() + 60})  # an earlier relay's index: left out when indexed again

    assert len(_event(client, good).json()["deliveries"]) == 3
    assert len(_event(client, bad).json()["deliveries"]) == 3  # those its record lists
    assert _event(client, broken).status_code == 404
    listed = admin(client, "/api/v1/deliveries")
    assert listed.status_code == 200 and len(listed.json()) == 9
    assert login(client).status_code == 303
    page = client.get("/ui")
    assert page.status_code == 200 and good in page.text and bad in page.text
    assert client.get(f"/ui?event={broken}").status_code == 200
    assert "delivery list unreadable" in caplog.text and "event unreadable" in caplog.text
    assert "delivery unreadable" in caplog.text


def test_an_earlier_relays_keys_are_still_read(client: TestClient, rt: Runtime, redis: Redis) -> None:
    """An event whose id holds `:`, stored by a relay that embedded the id raw: found, with its deliveries,
    and its retry is still a duplicate."""
    payload = sample_notification()
    payload["metadata"]["eventId"] = event_id = "legacy:1"
    received = time.time()
    fields = {
        "eventId": event_id,
        "kind": payload["kind"],
        "receivedAt": repr(received),
        "payload": json.dumps(payload),
    }
    redis.hset(f"{PREFIX}event:legacy:1", mapping=fields)
    redis.zadd(EVENTS, {event_id: received})
    redis.set(f"{PREFIX}dedup:legacy:1", "1")
    from relay.delivery.jobs import plan_job

    # Planned now, its deliveries are added to its record where it is.
    plan_job(rt, event_id)
    ids = rt.store.event_delivery_ids(event_id)
    assert len(ids) == 3 and redis.hget(f"{PREFIX}event:legacy:1", "deliveries") == " ".join(ids).encode()
    assert not redis.exists(event_key(event_id))
    # Planned as the earlier relay did it: its list at the raw key.
    redis.hdel(f"{PREFIX}event:legacy:1", "deliveries")
    redis.rpush(f"{PREFIX}event:legacy:1:deliveries", *ids)
    assert rt.store.event_delivery_ids(event_id) == ids
    found = _event(client, event_id).json()
    assert found["eventId"] == event_id and len(found["deliveries"]) == 3
    assert post(client, payload).json()["status"] == "duplicate"
    assert login(client).status_code == 303
    assert event_id in client.get("/ui").text


def test_an_event_an_earlier_relay_stored_where_a_delivery_list_went_is_left_alone(
    client: TestClient, rt: Runtime, redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """An earlier relay stored `Z:deliveries` at the key of Z's delivery list (as an earlier relay named it): Z
    is planned all the same, its deliveries read from its record, and `Z:deliveries` is left where it is."""
    z = sample_notification()["metadata"]["eventId"]
    squatter = sample_notification()
    squatter["metadata"]["eventId"] = f"{z}:deliveries"
    received = time.time()
    fields = {"eventId": f"{z}:deliveries", "kind": squatter["kind"], "receivedAt": repr(received)}
    redis.hset(f"{PREFIX}event:{z}:deliveries", mapping={**fields, "payload": json.dumps(squatter)})
    redis.zadd(EVENTS, {f"{z}:deliveries": received})
    assert _event(client, f"{z}:deliveries").status_code == 200  # read where it was stored
    assert _post(client, z) == "accepted"
    run_worker(rt)
    assert _states(rt, z) == ["delivered"] * 3
    assert len(_event(client, z).json()["deliveries"]) == 3
    assert "unreadable" not in caplog.text  # the hash is no list of Z's: not read as one, nor logged
    assert _event(client, f"{z}:deliveries").json()["eventId"] == f"{z}:deliveries"
    assert _event(client, f"{z}:deliveries").json()["deliveries"] == []
    assert redis.hgetall(f"{PREFIX}event:{z}:deliveries") == {
        k.encode(): v.encode() for k, v in {**fields, "payload": json.dumps(squatter)}.items()
    }
    assert not redis.exists(event_key(f"{z}:deliveries"))


def test_an_event_as_the_relay_before_stored_it_is_read_whole(
    client: TestClient, rt: Runtime, redis: Redis, sink: HttpSink
) -> None:
    """The layout of the relay before this one (issue 36's P6 changed it): the record with eventId, kind and an
    empty trace, its deliveries in a list of their own, a dedup key beside it. Read as it is: its deliveries
    listed (the list first, then ids the record has), its retry a duplicate, its planning again adds nothing."""
    from relay.delivery.jobs import plan_job

    payload = sample_notification()
    event_id = payload["metadata"]["eventId"]
    assert _post(client, event_id) == "accepted"
    run_worker(rt)
    ids = rt.store.event_delivery_ids(event_id)
    sent = len(sink.hits)
    key = event_key(event_id)
    redis.hdel(key, "deliveries")
    redis.hset(key, mapping={"eventId": event_id, "kind": payload["kind"], "trace": ""})
    redis.rpush(event_deliveries_key(event_id), *ids[:2])
    redis.hset(key, "deliveries", ids[2])  # one planned after the upgrade
    redis.set(dedup_key(event_id), "2", ex=60)
    found = _event(client, event_id).json()
    assert [d["id"] for d in found["deliveries"]] == ids and found["kind"] == payload["kind"]
    assert _post(client, event_id) == "duplicate"
    plan_job(rt, event_id)
    run_worker(rt)
    assert rt.store.event_delivery_ids(event_id) == ids and len(sink.hits) == sent
    assert redis.hget(key, "deliveries") == ids[2].encode() and redis.llen(event_deliveries_key(event_id)) == 2
    assert login(client).status_code == 303
    assert event_id in client.get("/ui").text
