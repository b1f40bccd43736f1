"""Delivery reliability: rate limits, Retry-After, fallback channels, outages, crashed jobs."""

from __future__ import annotations

import time
from typing import Any

import pytest
from rq import Queue
from rq.registry import ScheduledJobRegistry
from starlette.testclient import TestClient

from relay.core.clock import system_clock
from relay.delivery import attempt
from relay.delivery.gates import SLOT_SLACK
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.storage.work_queue import QUEUE_NAME
from tests.clock import ManualClock
from tests.conftest import admin, post, run_scheduled, run_worker, sample_notification
from tests.servers import HttpSink, free_port, wait_for


def one_message(**fields: Any) -> dict[str, Any]:
    message = sample_notification()["messages"][0]
    message.update(fields)
    return sample_notification(messages=[message])


def event(client: TestClient, payload: dict[str, Any]) -> dict[str, Any]:
    return dict(admin(client, f"/api/v1/events/{payload['metadata']['eventId']}").json())


def test_rate_limited_channel_spreads_sends_and_does_not_block_others(make_runtime: Any, sink: HttpSink) -> None:
    rt = make_runtime(
        channels={"slow-api": {"url": sink.url("/limited"), "rate": "4/s"}, "free": {"url": sink.url("/free")}},
        routes=[{"channels": ["slow-api", "free"]}],
        default={"channels": []},
        clock=ManualClock(system_clock(), base=system_clock),  # the slots are measured on the wall clock's pace
    )
    with TestClient(create_app(rt)) as client:
        for _ in range(6):
            assert post(client, one_message()).status_code == 202
        started = time.monotonic()  # the sink's stamps are monotonic too
        run_worker(rt)
        # The unlimited channel got everything at once; the limited one booked slots (below: none sent early).
        assert len(sink.at("/free")) == 6

        def drained() -> bool:
            run_scheduled(rt, due_only=True)
            run_worker(rt)
            return len(sink.at("/limited")) == 6

        wait_for(drained, timeout=15, interval=0.1)
        listing = admin(client, "/api/v1/deliveries?channel=slow-api").json()
    stamps = sorted(h.at for h in sink.at("/limited"))
    # 4/s is one slot every 0.25 s, booked from the first send on: the k-th send leaves at its slot or later
    # (later on a loaded machine, never sooner), so at least k slots after the burst started.
    early = [(k, round(at - started, 3)) for k, at in enumerate(stamps) if at - started < k * 0.25 - SLOT_SLACK]
    assert not early, early
    assert all(d["state"] == "delivered" and d["attempts"] == 1 for d in listing)


def test_retry_after_of_a_429_sets_the_wait(client: TestClient, rt: Runtime, sink: HttpSink) -> None:
    sink.script["/owners"] = [429]
    sink.retry_after["/owners"] = "120"
    payload = one_message()
    post(client, payload)
    before = rt.clock()
    run_worker(rt)
    owners = next(d for d in event(client, payload)["deliveries"] if d["channel"] == "owners-hook")
    assert owners["state"] == "retrying" and "429" in owners["lastError"]
    registry = ScheduledJobRegistry(queue=Queue(QUEUE_NAME, connection=rt.redis))
    when = [score for _, score in rt.redis.zrange(registry.key, 0, -1, withscores=True)]
    assert len(when) == 1
    # The test config's backoff is 1 s: the service's 120 s wins.
    assert 110 <= when[0] - before <= 130


def test_fallback_channel_gets_the_message_when_the_main_one_fails(make_runtime: Any, sink: HttpSink) -> None:
    rt = make_runtime(routes=[{"channels": ["owners-hook"], "fallback": ["audit-hook"]}], default={"channels": []})
    sink.script["/owners"] = [404]
    payload = one_message()
    with TestClient(create_app(rt)) as client:
        post(client, payload)
        run_worker(rt)
        deliveries = event(client, payload)["deliveries"]
    by_channel = {d["channel"]: d for d in deliveries}
    assert by_channel["owners-hook"]["state"] == "failed"
    assert by_channel["audit-hook"]["state"] == "delivered"
    assert by_channel["audit-hook"]["fallbackFor"] == by_channel["owners-hook"]["id"]
    hit = sink.at("/audit")[0].json()
    assert hit["title"].startswith("[not delivered through its main channel]")
    assert hit["message"] == payload["messages"][0]["message"]


def test_sink_down_then_back_everything_delivered_once_by_retry_or_replay(make_runtime: Any) -> None:
    port = free_port()
    rt = make_runtime(
        # Without the outage rule (tests/delivery/test_outages.py has it): retries, then failed and replayed.
        channels={"flaky": {"url": f"json://127.0.0.1:{port}/in", "outage": "off"}},
        routes=[{"channels": ["flaky"]}],
        default={"channels": []},
    )
    payloads = [one_message() for _ in range(5)]
    with TestClient(create_app(rt)) as client:
        for payload in payloads:
            post(client, payload)
        run_worker(rt)  # nothing listens: connection refused is transient
        states = {d["state"] for p in payloads for d in event(client, p)["deliveries"]}
        assert states == {"retrying"}
        while run_scheduled(rt):  # the outage outlasts every retry
            run_worker(rt)
        failed = admin(client, "/api/v1/deliveries?state=failed").json()
        assert len(failed) == 5 and all(d["attempts"] == 3 for d in failed)

        back = HttpSink().start(port)  # the sink returns on the same address
        try:
            answer = admin(client, "/api/v1/deliveries/replay", "POST", json={"channel": "flaky"})
            assert answer.json()["replayed"] == 5
            run_worker(rt)
            assert len(back.at("/in")) == 5
            assert admin(client, "/api/v1/deliveries/replay", "POST", json={}).json()["replayed"] == 0
            run_worker(rt)
            assert len(back.at("/in")) == 5
            delivered = admin(client, "/api/v1/deliveries?state=delivered").json()
            assert len(delivered) == 5 and all(d["attempts"] == 4 for d in delivered)
        finally:
            back.stop()


def test_a_job_that_keeps_crashing_ends_failed_and_replayable(
    client: TestClient, rt: Runtime, sink: HttpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = one_message()
    post(client, payload)

    def crash(*args: Any) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr(attempt, "_attempt", crash)
    run_worker(rt)  # relay queues the crashed send again twice, then marks the delivery failed
    owners = next(d for d in event(client, payload)["deliveries"] if d["channel"] == "owners-hook")
    assert owners["state"] == "failed"
    assert "crashed or timed out" in owners["lastError"] and "RuntimeError" in owners["lastError"]
    monkeypatch.undo()
    assert admin(client, "/api/v1/deliveries/replay", "POST", json={"ids": [owners["id"]]}).json()["replayed"] == 1
    run_worker(rt)
    assert len(sink.at("/owners")) == 1
