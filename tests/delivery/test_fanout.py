"""A large fan-out: refused at intake past `server.limits.max_deliveries`, and planned whole up to it (in chunks
of bounded size, each one atomic), never a 202 followed by nothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from starlette.testclient import TestClient

from relay.core.model import Delivery
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.runtime.worker import Sweep, sweep
from relay.storage import store as store_module
from relay.storage.leases import LEASES, UNPLANNED, event_unit
from relay.storage.store import Store, event_key, metric_field
from tests.conftest import admin, post, run_worker, sample_notification
from tests.servers import SmtpSink


def _requester_messages(count: int, recipients: int, email: bool = False) -> list[dict[str, Any]]:
    """Messages to the requester route (one per-recipient channel: one delivery per recipient). Without
    `email`, the recipients have none and relay no catalog to ask: each is recorded as skipped, nothing sent."""
    template = sample_notification()["messages"][1]
    people = [
        {"userRef": f"user:default/u{i}", **({"spec.email": f"u{i}@example.com"} if email else {})}
        for i in range(recipients)
    ]
    return [{**template, "recipients": people} for _ in range(count)]


def test_the_default_limits_fan_out_is_planned_whole_by_a_real_worker(client: TestClient, rt: Runtime) -> None:
    """20 messages x 1,000 recipients: one script call of about 1.1 million arguments before, which Redis
    refused (a broken pipe; the notification given up after three tries, its 202 a lie)."""
    limit = rt.config.server.limits.max_deliveries
    assert limit == 20 * 1000  # the default: what this test plans
    payload = sample_notification(messages=_requester_messages(20, 1000))
    event_id = payload["metadata"]["eventId"]
    assert post(client, payload).json() == {"eventId": event_id, "status": "accepted"}
    started = time.monotonic()
    run_worker(rt)
    print(f"planning {limit} deliveries took {time.monotonic() - started:.1f}s")  # about 4 s here (2 cores)
    ids = rt.store.event_delivery_ids(event_id)
    assert len(ids) == len(set(ids)) == limit
    # Listed in the event's record, a field a chunk (each addition costs its own ids).
    assert int(rt.redis.hget(event_key(event_id), "parts") or 0) == limit // store_module.PLAN_CHUNK - 1
    paged: list[str] = []
    cursor: str | None = "0"
    started = time.monotonic()
    while cursor is not None:  # the API's pages, the largest it gives, each read whole
        page = admin(client, f"/api/v1/events/{event_id}?limit=1000&cursor={cursor}").json()
        paged += [d["id"] for d in page["deliveries"]]
        cursor = page.get("next")
    print(f"paging through {limit} deliveries took {time.monotonic() - started:.1f}s")
    assert paged == ids
    kind = payload["kind"]
    skipped = metric_field("relay_deliveries_total", state="skipped", channel="requester-email", kind=kind)
    assert rt.store.counters().get(skipped, 0) == limit
    assert rt.redis.zcard(UNPLANNED) == 0 and rt.redis.hlen(LEASES) == 0


def test_a_notification_one_delivery_over_the_limit_is_refused_naming_it(client: TestClient, rt: Runtime) -> None:
    messages = _requester_messages(20, 1000) + _requester_messages(1, 1)
    payload = sample_notification(messages=messages)
    answer = post(client, payload)
    assert answer.status_code == 422
    body = answer.json()
    assert body["inputErrorField"] == "messages"
    assert "20001 deliveries is over the limit of 20000" in body["errors"][0]
    assert "server.limits.max_deliveries" in body["moreInfo"]["solutions"][0]
    assert rt.store.event(payload["metadata"]["eventId"]) is None
    reason = metric_field("relay_notifications_rejected_total", status="422", reason="limits")
    assert rt.store.counters().get(reason, 0) == 1


def test_the_limit_counts_each_routed_channel_and_each_recipient_of_a_per_recipient_one(
    client: TestClient, make_runtime: Callable[..., Runtime]
) -> None:
    # The sample: message 0 to owners-hook (1), message 1 to requester-email (1 recipient), message 2 to
    # managers-hook (1): 3 deliveries, planned as 3.
    rt = make_runtime(server={"limits": {"max_deliveries": 3}, "auth": {"tokens": ["test-webhook-token-1234"]}})
    payload = sample_notification()
    with TestClient(create_app(rt)) as small:
        assert post(small, payload).status_code == 202
        run_worker(rt)
        assert len(rt.store.event_delivery_ids(payload["metadata"]["eventId"])) == 3
        second = payload["messages"][1]
        two = {**second, "recipients": second["recipients"] * 2}  # one address twice: counted twice
        refused = post(small, sample_notification(messages=[payload["messages"][0], two, payload["messages"][2]]))
        assert refused.status_code == 422
        assert "4 deliveries is over the limit of 3" in refused.json()["errors"][0]


def test_a_planning_stopped_part_way_is_planned_again_whole_and_sends_each_once(
    client: TestClient, rt: Runtime, smtp: SmtpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "PLAN_CHUNK", 2)
    real = Store._create
    calls: list[int] = []

    def second_chunk_lost(
        self: Store, event_id: str, event: str, records: list[Delivery], take: set[str], done: bool
    ) -> Any:
        calls.append(len(records))
        if len(calls) == 2:  # Redis gone between two chunks: the first stored (and its leases taken), not the rest
            raise RedisConnectionError("connection lost")
        return real(self, event_id, event, records, take, done)

    monkeypatch.setattr(Store, "_create", second_chunk_lost)
    payload = sample_notification(messages=_requester_messages(1, 5, email=True))
    event_id = payload["metadata"]["eventId"]
    assert post(client, payload).status_code == 202
    run_worker(rt)  # its planning job fails on the second chunk
    assert len(rt.store.event_delivery_ids(event_id)) == 2
    # The leases of the first chunk were given back, due now; the notification's own stays with this worker,
    # whose sweep of its own leases puts it back among the notifications to plan: nothing was lost.
    assert rt.store.leases.held() == {event_unit(event_id): rt.name}
    seen = Sweep()
    sweep(rt, time.time(), seen)
    assert sweep(rt, time.time(), seen) == 1 and rt.redis.zscore(UNPLANNED, event_id) is not None
    run_worker(rt)
    ids = rt.store.event_delivery_ids(event_id)
    assert len(ids) == len(set(ids)) == 5
    assert sorted(to for m in smtp.mails for to in m.envelope_to) == sorted(f"u{i}@example.com" for i in range(5))
    assert {r.state for r in rt.store.deliveries(ids) if r} == {"delivered"}
    assert rt.redis.zcard(UNPLANNED) == 0

    from tests.conftest import plan_job

    plan_job(rt, event_id)  # planned again once all were sent: nothing is sent twice
    run_worker(rt)
    assert len(smtp.mails) == 5
