"""A channel that is down, end to end: real Redis, real RQ (in process), a real local HTTP server that fails
for a while and comes back. None of its deliveries fail; each is sent once; what waited goes out oldest
first. The clock is the runtime's one clock (`Runtime.clock`), moved by each test."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from starlette.testclient import TestClient

from relay.core.clock import system_clock
from relay.outages.sending import SLOT_LEAD, book_slots
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.storage.leases import SLOTS
from tests.clock import ManualClock
from tests.conftest import admin, post, run_scheduled, run_worker, sample_notification
from tests.servers import HttpSink, wait_for

DOWN = "down-hook"


def one_message() -> dict[str, Any]:
    message = sample_notification()["messages"][0]
    return sample_notification(messages=[message])


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(system_clock())


@pytest.fixture
def down_rt(make_runtime: Callable[..., Runtime], sink: HttpSink, clock: ManualClock) -> Runtime:
    rt = make_runtime(
        channels={
            DOWN: {"url": sink.url("/down"), "outage": {"after": 2, "probe": "30s"}},
            "spare": {"url": sink.url("/spare")},
        },
        routes=[{"channels": [DOWN]}],
        default={"channels": []},
        worker_threads=1,  # one send at a time: the order of the sends is the order they were taken
        clock=clock,
    )
    return rt


def deliveries(client: TestClient, state: str | None = None) -> list[dict[str, Any]]:
    return list(admin(client, "/api/v1/deliveries" + (f"?state={state}" if state else "")).json())


def channel(client: TestClient, name: str = DOWN) -> dict[str, Any]:
    answer = admin(client, "/api/v1/channels")
    assert answer.status_code == 200
    return next(c for c in answer.json()["channels"] if c["name"] == name)


def after(rt: Runtime, clock: ManualClock, seconds: float) -> None:
    """`seconds` later on the runtime's clock (a retry, a held delivery's next look come due); then a worker
    takes what is due."""
    clock.advance(seconds)
    rt.work.request_wake()
    run_worker(rt)


def test_a_channel_down_for_a_while_loses_nothing_and_sends_each_once_oldest_first(
    down_rt: Runtime, sink: HttpSink, clock: ManualClock
) -> None:
    rt = down_rt
    sink.script["/down"] = [503, 503, 503]  # two make it down, the first probe fails too
    payloads = [one_message() for _ in range(6)]
    with TestClient(create_app(rt)) as client:
        for payload in payloads:
            assert post(client, payload).status_code == 202
        run_worker(rt)
        states = sorted(d["state"] for d in deliveries(client))
        assert states == ["held"] * 5 + ["retrying"]  # the first failed before the channel was down
        state = channel(client)
        assert state["state"] == "down" and state["since"] is not None and "503" in state["lastError"]
        held = deliveries(client, "held")
        assert all(d["lastError"].startswith("channel down since ") and "503" in d["lastError"] for d in held)
        assert len(sink.started) == 2  # the rest never tried the dead channel

        after(rt, clock, 5)  # the retry comes due: it waits too; no probe before 30 s
        assert sorted(d["state"] for d in deliveries(client)) == ["held"] * 6
        assert len(sink.started) == 2

        after(rt, clock, 30)  # one probe (it fails), and only one
        assert len(sink.started) == 3
        assert sorted(d["state"] for d in deliveries(client)) == ["held"] * 6
        after(rt, clock, 31)  # the next probe is 60 s after the failed one: not yet
        assert len(sink.started) == 3

        after(rt, clock, 30)  # it succeeds: up, and everything that waited goes out
        assert channel(client)["state"] == "up"
        final = deliveries(client)
        assert {d["state"] for d in final} == {"delivered"}
        assert not deliveries(client, "failed")
        assert len(sink.at("/down")) == 6  # each sent once
        # The probe first (the oldest waiting), then the rest oldest first: the order they were posted in.
        order = [d["id"] for d in sorted(final, key=lambda d: d["createdAt"])]
        assert [d["id"] for d in sorted(final, key=lambda d: d["updatedAt"])] == order
        assert all(d["attempts"] <= 3 for d in final)  # waiting spent none of their tries
        state = channel(client)
        assert state["deliveredLastHour"] == 6 and state["failedLastHour"] == 3
        assert state["lastSuccessAt"] is not None and state["p95SendSeconds"] is not None


def _make_down(rt: Runtime, client: TestClient, sink: HttpSink) -> None:
    sink.script["/down"] = [503, 503] + [503] * 20
    for _ in range(2):
        post(client, one_message())
    run_worker(rt)
    assert channel(client)["state"] == "down"


def test_replays_and_releases_to_a_down_channel_wait_too(down_rt: Runtime, sink: HttpSink, clock: ManualClock) -> None:
    rt = down_rt
    sink.script["/down"] = [404]  # a permanent failure: failed, and it counts for nothing
    with TestClient(create_app(rt)) as client:
        post(client, one_message())
        run_worker(rt)
        [failed] = deliveries(client, "failed")
        assert channel(client)["state"] == "up"
        _make_down(rt, client, sink)
        tried = len(sink.started)

        assert admin(client, "/api/v1/deliveries/replay", "POST", json={"id": failed["id"]}).json()["replayed"] == 1
        run_worker(rt)
        replayed = next(d for d in deliveries(client) if d["id"] == failed["id"])
        assert replayed["state"] == "held" and replayed["lastError"].startswith("channel down since ")

        released = admin(client, "/api/v1/deliveries/release", "POST", json={"channel": DOWN}).json()["released"]
        # The replayed one and the second of _make_down; the first waits for its retry (10 s, on the runtime's
        # clock, which stands still).
        assert released == 2
        run_worker(rt)
        states = sorted(d["state"] for d in deliveries(client))
        assert states == ["held", "held", "retrying"]  # waiting still
        assert len(sink.started) == tried  # none of them tried the dead channel
        assert not deliveries(client, "failed")


def test_a_fallback_is_used_as_before_and_a_down_channel_does_not_trigger_it(
    make_runtime: Callable[..., Runtime], sink: HttpSink
) -> None:
    rt = make_runtime(
        channels={
            DOWN: {"url": sink.url("/down"), "outage": {"after": 1}},
            "spare": {"url": sink.url("/spare")},
        },
        routes=[{"channels": [DOWN], "fallback": ["spare"]}],
        default={"channels": []},
    )
    sink.script["/down"] = [503] * 10
    with TestClient(create_app(rt)) as client:
        post(client, one_message())
        run_worker(rt)
        [held] = deliveries(client)
        assert held["state"] == "held" and held["channel"] == DOWN
        assert not sink.at("/spare")  # it did not fail: it waits for its channel


def test_channels_api_needs_admin_credentials_and_keeps_secrets_out(
    make_runtime: Callable[..., Runtime], sink: HttpSink
) -> None:
    secret = "s3cret-pw-0042"
    url = sink.url("/down").replace("json://", f"json://relay:{secret}@")
    rt = make_runtime(
        channels={DOWN: {"url": url, "outage": {"after": 1}}, "quiet": {"url": sink.url("/q"), "outage": "off"}},
        routes=[{"channels": [DOWN]}],
        default={"channels": []},
    )
    sink.script["/down"] = [500] * 10
    with TestClient(create_app(rt)) as client:
        assert client.get("/api/v1/channels").status_code == 401
        post(client, one_message())
        run_worker(rt)
        answer = admin(client, "/api/v1/channels")
        assert secret not in answer.text
        rows = answer.json()["channels"]
        assert [r["name"] for r in rows] == [DOWN, "quiet"]
        down, quiet = rows
        assert set(down) == {
            "name", "state", "since", "lastError", "lastSuccessAt", "deliveredLastHour", "failedLastHour",
            "p95SendSeconds",
        }  # fmt: skip
        assert down["state"] == "down" and down["failedLastHour"] == 1 and down["lastSuccessAt"] is None
        assert quiet == {
            "name": "quiet", "state": "up", "since": None, "lastError": None, "lastSuccessAt": None,
            "deliveredLastHour": 0, "failedLastHour": 0, "p95SendSeconds": None,
        }  # fmt: skip
        assert secret not in json.dumps(deliveries(client))

        metrics = client.get("/metrics").text
        assert f'relay_channel_up{{channel="{DOWN}"}} 0.0' in metrics
        page = admin(client, "/ui").text
        assert f'data-channel="{DOWN}" data-state="down"' in page
        assert 'data-label="Held by">channel down since' in page  # the held row says why it waits, once
        assert "channel down: channel down" not in page
        assert secret not in page


@pytest.mark.slow
def test_what_waited_goes_out_oldest_first_within_the_channels_rate(
    make_runtime: Callable[..., Runtime], sink: HttpSink
) -> None:
    # On a clock that runs at the wall clock's pace from where the test moves it: the sends' spacing is real.
    clock = ManualClock(system_clock(), base=system_clock)
    rt = make_runtime(
        channels={DOWN: {"url": sink.url("/down"), "rate": "5/s", "outage": {"after": 1, "probe": "30s"}}},
        routes=[{"channels": [DOWN]}],
        default={"channels": []},
        worker_threads=1,  # one sender: on a loaded machine, two sends late for their slots could race
        clock=clock,
    )
    sink.script["/down"] = [503]
    with TestClient(create_app(rt)) as client:
        for i in range(6):
            payload = one_message()
            payload["messages"][0]["message"] = f"number {i}"
            post(client, payload)
            run_worker(rt)  # one at a time: planned (and created) in this order
        assert sorted(d["state"] for d in deliveries(client)) == ["held"] * 6
        after(rt, clock, 30)  # the probe (the oldest) succeeds; the rest go out at the channel's rate

        def all_sent() -> bool:
            run_scheduled(rt, due_only=True)  # RQ's scheduler: the wake-ups at the rate's slots
            run_worker(rt)
            return len(sink.at("/down")) == 6

        wait_for(all_sent, timeout=10, interval=0.05)
        hits = sink.at("/down")
        assert [n for h in hits for n in range(6) if f"number {n}" in h.json()["message"]] == [0, 1, 2, 3, 4, 5]
        # 5/s is a slot every 0.2 s: each send leaves at its slot or later (as tests/delivery/test_reliability.py
        # measures it), so the six span at least five slots; without the rate they leave within a few ms.
        assert hits[-1].at - hits[0].at >= 5 * 0.2 - 0.05
        assert {d["state"] for d in deliveries(client)} == {"delivered"}


def test_every_try_is_in_the_attempt_log_the_tripping_one_and_a_probe_marked_so(
    down_rt: Runtime, sink: HttpSink, clock: ManualClock
) -> None:
    """Issue 48: the try that marked the channel down and a failed probe were missing from `attemptLog`, so the
    page said "the last 2 of 4"; every try is logged, a probe marked as one, and the counts agree."""
    rt = down_rt
    sink.script["/down"] = [503, 503, 503]  # two trip the channel; the first probe fails
    with TestClient(create_app(rt)) as client:
        assert post(client, one_message()).status_code == 202  # fails, retrying
        run_worker(rt)
        assert post(client, one_message()).status_code == 202  # fails: the channel is down, it waits
        run_worker(rt)
        [tripping] = deliveries(client, "held")
        after(rt, clock, 31)  # the oldest waiting probes it, and fails
        after(rt, clock, 61)  # the next probe succeeds: up, everything goes
        details = [admin(client, f"/api/v1/deliveries/{d['id']}").json() for d in deliveries(client)]
    assert {d["state"] for d in details} == {"delivered"}
    for detail in details:
        assert len(detail["attemptLog"]) == detail["attempts"], detail["attemptLog"]
    log = next(d for d in details if d["id"] == tripping["id"])["attemptLog"]
    assert log[0]["outcome"] == "transient" and "probe" not in log[0]  # the try that tripped the channel
    probes = [e for d in details for e in d["attemptLog"] if e.get("probe")]
    assert probes and probes[0]["outcome"] == "transient", [d["attemptLog"] for d in details]  # marked as one


def test_what_waited_is_booked_its_slots_in_creation_order(make_runtime: Callable[..., Runtime]) -> None:
    """Issue 48: with a rate, the channel back up books each waiting delivery's slot oldest first (two workers'
    threads booked them in the order they ran: 0, 2, 1, 4, 3, 5 at the sink), each due a second before it."""
    channels = {DOWN: {"url": "json://127.0.0.1:9/", "rate": "5/s"}}
    rt = make_runtime(channels=channels, routes=[{"channels": [DOWN]}], default={"channels": []})
    waited = ("oldest", "second", "third", "newest")  # as the resuming script gives them, oldest first
    now = rt.clock()
    book_slots(rt, DOWN, 5.0, waited)
    due = rt.store.leases.due_times(list(waited))
    slots = {k.decode(): float(v) for k, v in rt.redis.hgetall(SLOTS).items()}
    assert [slots[i] - now for i in waited] == pytest.approx([0.0, 0.2, 0.4, 0.6], abs=0.05)
    assert all(due[i] == pytest.approx(slots[i] - SLOT_LEAD) for i in waited)
