"""Digests end to end: a route's deliveries to one channel (one address, on a per_recipient channel) are
gathered for the window and sent as one message; a window of one sends that message unchanged; max_items
sends at once; a digest is retried, failed, replayed and released as one delivery and its items follow it.
Real Redis, real RQ, real SMTP and HTTP sinks. In-process tests move the digest's wake-up (an RQ scheduled
job) forward with `run_scheduled`; the worker-process tests wait for the real window."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rq.scheduler import RQScheduler
from starlette.testclient import TestClient

from relay.core.model import Delivery
from relay.digests.model import CATCH_UP_SECONDS, RELEASED_SECONDS
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.storage.work_queue import QUEUE_NAME
from tests.conftest import admin, post, run_scheduled, run_worker, sample_notification
from tests.processes import kill, stop
from tests.servers import HttpSink, SmtpSink, wait_for

pytestmark = pytest.mark.dated

RELAY = str(Path(sys.executable).parent / "relay")
OWNERS = "recipient-type:system-owner"
REQUESTERS = "recipient-type:access-control-requester"


def _routes(digest: Any, types: str = OWNERS, channel: str = "owners-hook", **more: Any) -> list[dict[str, Any]]:
    return [{"name": "gathered", "recipient_types": [types], "channels": [channel], "digest": digest, **more}]


def _notification(title: str, requester: str = "alice.rossi@example.com") -> dict[str, Any]:
    """The sample with one message to the system owner titled `title`, and one to a requester."""
    data = sample_notification()
    owner, requester_msg = data["messages"][0], data["messages"][1]
    owner["title"], owner["message"] = title, f"text of {title}"
    requester_msg["title"], requester_msg["message"] = f"for the requester: {title}", f"requester text of {title}"
    requester_msg["recipients"][0]["spec.email"] = requester
    data["messages"] = [owner, requester_msg]
    return data


def _accept(rt: Runtime, *payloads: dict[str, Any]) -> list[str]:
    with TestClient(create_app(rt)) as client:
        for payload in payloads:
            assert post(client, payload).status_code == 202
            rt.clock.advance(0.001)  # received one after the other
    run_worker(rt)
    return [str(p["metadata"]["eventId"]) for p in payloads]


def _deliveries(rt: Runtime, event_id: str, channel: str = "owners-hook") -> list[Delivery]:
    return [r for r in rt.store.deliveries(rt.store.event_delivery_ids(event_id)) if r and r.channel == channel]


def _item(rt: Runtime, event_id: str, channel: str = "owners-hook") -> Delivery:
    [item] = [r for r in _deliveries(rt, event_id, channel) if not r.items]
    return item


def _digest(rt: Runtime, ident: str) -> Delivery:
    record = rt.store.delivery(ident)
    assert record is not None
    return record


def _send_due(rt: Runtime) -> None:
    """The digests' wake-ups now, as if their windows had ended."""
    run_scheduled(rt)
    run_worker(rt)


def test_a_window_gathers_several_notifications_into_one_post(
    make_runtime: Callable[..., Runtime], sink: HttpSink
) -> None:
    rt = make_runtime(routes=_routes("15m"))
    events = _accept(rt, _notification("first"), _notification("second"), _notification("third"))
    assert sink.at("/owners") == []
    items = [_item(rt, e) for e in events]
    [digest_id] = {i.digest for i in items}
    assert digest_id is not None
    assert {i.state for i in items} == {"held"}
    digest = _digest(rt, digest_id)
    assert digest.state == "held" and sorted(digest.items) == sorted(i.id for i in items)
    assert digest.notBefore is not None and 899 < digest.notBefore - digest.createdAt <= 900
    assert all(i.notBefore == digest.notBefore for i in items)
    with TestClient(create_app(rt)) as client:
        held = admin(client, "/api/v1/deliveries?state=held").json()
        assert {d["id"] for d in held} == {digest_id, *(i.id for i in items)}
        # Listed with the notification of the item that opened it (handed to the senders together, the three
        # join in any order).
        assert digest.eventId in events
        shown = admin(client, f"/api/v1/events/{digest.eventId}").json()["deliveries"]
        assert [sorted(d.get("items", [])) for d in shown if d["id"] == digest_id] == [sorted(i.id for i in items)]
        assert {d.get("digest") for d in shown if d["channel"] == "owners-hook" and d["id"] != digest_id} == {digest_id}

    _send_due(rt)
    [hit] = sink.at("/owners")
    body = hit.json()
    assert body["title"] == "3 notifications"
    text = body["message"]
    assert text.index("first") < text.index("second") < text.index("third")
    assert "text of second" in text
    assert _digest(rt, digest_id).state == "delivered"
    assert {_item(rt, e).state for e in events} == {"delivered"}
    assert _digest(rt, digest_id).public()["template"] == "relay:_digest/default.txt.j2"
    _send_due(rt)  # nothing is sent twice
    assert len(sink.at("/owners")) == 1


def test_a_window_that_gathered_one_delivery_sends_that_message_unchanged(
    make_runtime: Callable[..., Runtime], sink: HttpSink
) -> None:
    plain = make_runtime()
    _accept(plain, _notification("alone"))
    [unchanged] = sink.at("/owners")
    sink.clear()
    rt = make_runtime(routes=_routes({"window": "2s"}))
    [event] = _accept(rt, _notification("alone"))
    assert sink.at("/owners") == []
    _send_due(rt)
    [hit] = sink.at("/owners")
    assert (hit.json()["title"], hit.json()["message"]) == (unchanged.json()["title"], unchanged.json()["message"])
    item = _item(rt, event)
    digest = _digest(rt, item.digest or "")
    assert (item.state, digest.state, digest.items) == ("delivered", "delivered", [item.id])


def test_max_items_sends_at_once_and_the_next_delivery_opens_a_new_digest(
    make_runtime: Callable[..., Runtime], sink: HttpSink
) -> None:
    rt = make_runtime(routes=_routes({"window": "1h", "max_items": 2}))
    events = _accept(rt, _notification("one"), _notification("two"), _notification("three"))
    [hit] = sink.at("/owners")  # the first two to join, without waiting for the window
    assert hit.json()["title"] == "2 notifications"
    # Handed to the senders together, they join in any order: two in the full digest, one in the next.
    items = {title: _item(rt, e) for title, e in zip(("one", "two", "three"), events, strict=True)}
    full = {t for t, item in items.items() if item.state == "delivered"}
    [left] = {t for t, item in items.items() if item.state == "held"}
    assert len(full) == 2 and all(t in hit.json()["message"] for t in full) and left not in hit.json()["message"]
    assert len({items[t].digest for t in full}) == 1 and items[left].digest not in {items[t].digest for t in full}
    _send_due(rt)
    assert [(h.json()["title"], h.json()["message"]) for h in sink.at("/owners")][1:] == [(left, f"text of {left}")]
    assert {item.state for item in (_item(rt, e) for e in events)} == {"delivered"}


def test_one_email_per_recipient_gathers_only_that_recipients_deliveries(
    make_runtime: Callable[..., Runtime], smtp: SmtpSink, sink: HttpSink
) -> None:
    rt = make_runtime(routes=_routes("10m", types=REQUESTERS, channel="requester-email"))
    _accept(
        rt,
        _notification("a1"),
        _notification("b1", requester="bob.bianchi@example.com"),
        _notification("a2", requester="Alice.Rossi@example.com"),  # the same address, written otherwise
    )
    assert smtp.mails == []
    _send_due(rt)
    mails = {m.envelope_to[0].lower(): m for m in smtp.mails}
    assert len(smtp.mails) == 2 and set(mails) == {"alice.rossi@example.com", "bob.bianchi@example.com"}
    alice, bob = mails["alice.rossi@example.com"], mails["bob.bianchi@example.com"]
    assert alice.subject == "2 notifications"
    html, text = alice.part("text/html") or "", alice.part("text/plain") or ""
    assert "for the requester: a1" in html and "for the requester: a2" in html and "b1" not in html
    assert text.index("requester text of a1") < text.index("requester text of a2")
    assert bob.subject == "for the requester: b1"  # a window of one: the message as it would go alone


def test_a_failed_digest_is_replayed_as_one_and_its_items_follow_it(
    make_runtime: Callable[..., Runtime], sink: HttpSink
) -> None:
    rt = make_runtime(routes=_routes("5m"), retry={"attempts": 1, "backoff": ["1s"]})
    events = _accept(rt, _notification("x"), _notification("y"))
    sink.script["/owners"] = [500]
    _send_due(rt)
    items = [_item(rt, e) for e in events]
    digest = _digest(rt, items[0].digest or "")
    assert digest.state == "failed" and {i.state for i in items} == {"failed"}
    assert all(i.lastError and i.lastError.startswith(f"digest {digest.id}: ") for i in items)
    with TestClient(create_app(rt)) as client:
        failed = admin(client, "/api/v1/deliveries?state=failed").json()
        assert {d["id"] for d in failed} == {digest.id, *(i.id for i in items)}
        answer = admin(client, "/api/v1/deliveries/replay", method="POST", json={}).json()
        assert answer["replayed"] == 1  # the digest, never its items one by one
    assert {_item(rt, e).state for e in events} == {"queued"}
    run_worker(rt)
    [hit] = sink.at("/owners")
    assert hit.json()["title"] == "2 notifications"
    assert _digest(rt, digest.id).state == "delivered"
    assert {_item(rt, e).state for e in events} == {"delivered"}


def test_release_of_a_gathered_delivery_sends_its_digest_now(
    make_runtime: Callable[..., Runtime], sink: HttpSink, tmp_path: Path
) -> None:
    rt = make_runtime(routes=_routes("1h"))
    events = _accept(rt, _notification("p"), _notification("q"))
    with TestClient(create_app(rt)) as client:
        answer = admin(client, "/api/v1/deliveries/release", method="POST", json={"eventId": events[1]}).json()
    assert answer["released"] == 1
    run_worker(rt)
    [hit] = sink.at("/owners")
    assert hit.json()["title"] == "2 notifications"
    assert {_item(rt, e).state for e in events} == {"delivered"}
    _send_due(rt)  # its wake-up at the window's end finds it sent
    assert len(sink.at("/owners")) == 1


def test_held_by_quiet_hours_they_go_out_as_one_digest_when_the_interval_opens(
    make_runtime: Callable[..., Runtime], sink: HttpSink
) -> None:
    office = {
        "name": "office-hours",
        "time_intervals": [{"weekdays": ["monday:friday"], "times": [{"start_time": "08:00", "end_time": "18:00"}]}],
    }
    rt = make_runtime(time_intervals=[office], routes=_routes("15m", active_time_intervals=["office-hours"]))
    rt.clock.set(datetime(2026, 11, 27, 20, 0, tzinfo=UTC).timestamp())  # Friday evening
    events = _accept(rt, _notification("night 1"), _notification("night 2"), _notification("night 3"))
    assert {(_item(rt, e).state, _item(rt, e).digest) for e in events} == {("held", None)}
    rt.clock.set(datetime(2026, 11, 30, 8, 0, tzinfo=UTC).timestamp())  # Monday morning
    _send_due(rt)  # the wake-ups: each delivery joins one digest, which closes soon (not 15 minutes later)
    items = [_item(rt, e) for e in events]
    [digest_id] = {i.digest for i in items}
    digest = _digest(rt, digest_id or "")
    assert digest.notBefore is not None and digest.notBefore - digest.createdAt <= CATCH_UP_SECONDS
    _send_due(rt)
    [hit] = sink.at("/owners")
    assert hit.json()["title"] == "3 notifications"
    assert {_item(rt, e).state for e in events} == {"delivered"}


OFFICE = {
    "name": "office-hours",
    "time_intervals": [{"weekdays": ["monday:friday"], "times": [{"start_time": "08:00", "end_time": "18:00"}]}],
}
FRIDAY_EVENING = datetime(2026, 11, 27, 20, 0, tzinfo=UTC).timestamp()


def test_release_on_a_route_with_quiet_hours_and_a_digest_sends_now(
    make_runtime: Callable[..., Runtime], sink: HttpSink, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Released deliveries gather apart, in a digest that closes within the catch-up and that quiet hours
    do not hold again: one release sends them, while the interval is still closed."""
    from relay.cli import main

    rt = make_runtime(time_intervals=[OFFICE], routes=_routes("1h", active_time_intervals=["office-hours"]))
    rt.clock.set(FRIDAY_EVENING)
    events = _accept(rt, _notification("night 1"), _notification("night 2"))
    assert {(_item(rt, e).state, _item(rt, e).digest) for e in events} == {("held", None)}
    assert (
        main(["release", "--channel", "owners-hook", "--config", str(_config_file(rt, tmp_path))], clock=rt.clock) == 0
    )
    assert "released 2 held deliveries" in capsys.readouterr().out
    run_worker(rt)  # both join one released digest
    [digest_id] = {_item(rt, e).digest for e in events}
    digest = _digest(rt, digest_id or "")
    assert digest.state == "held" and digest.released
    assert digest.notBefore is not None and digest.notBefore - digest.createdAt <= RELEASED_SECONDS
    _send_due(rt)  # its wake-up, still outside office hours: it goes
    [hit] = sink.at("/owners")
    assert hit.json()["title"] == "2 notifications"
    assert {_item(rt, e).state for e in events} == {"delivered"}
    assert _digest(rt, digest_id or "").state == "delivered"
    _send_due(rt)  # the deliveries' own wake-ups at the interval's opening find them sent
    assert len(sink.at("/owners")) == 1


def test_release_counts_agree_in_the_dry_run_the_bar_and_the_api(
    make_runtime: Callable[..., Runtime],
    sink: HttpSink,
    smtp: SmtpSink,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Three items in one digest, and three e-mails held by another route's quiet hours: four deliveries go
    out (the digest once, for its items), and the dry run, the progress bar, the count and the API all say 4."""
    from relay.cli import main

    routes = [
        *_routes("1h"),
        {
            "name": "quiet",
            "recipient_types": [REQUESTERS],
            "channels": ["requester-email"],
            "active_time_intervals": ["office-hours"],
        },
    ]
    rt = make_runtime(time_intervals=[OFFICE], routes=routes)
    rt.clock.set(FRIDAY_EVENING)
    events = _accept(rt, _notification("a"), _notification("b"), _notification("c"))
    config = str(_config_file(rt, tmp_path))
    with TestClient(create_app(rt)) as client:
        held = admin(client, "/api/v1/deliveries?state=held").json()
        assert len(held) == 7  # the digest, its three items, the e-mails
        dry = admin(client, "/api/v1/deliveries/release", method="POST", json={"dryRun": True}).json()
        assert dry["released"] == 4
    assert main(["release", "--dry-run", "--config", config], clock=rt.clock) == 0
    out = capsys.readouterr().out
    assert out.count("would release ") == 4 and out.count("(a digest of 3)") == 1
    assert "4 held deliveries would be sent now (dry run)" in out
    assert main(["release", "--config", config], clock=rt.clock) == 0
    captured = capsys.readouterr()
    assert "released 4 held deliveries" in captured.out
    assert captured.err.rstrip().endswith("4/4")
    run_worker(rt)
    assert len(sink.at("/owners")) == 1 and len(smtp.mails) == 3
    assert {_item(rt, e).state for e in events} == {"delivered"}
    with TestClient(create_app(rt)) as client:
        assert admin(client, "/api/v1/deliveries?state=held").json() == []


def test_operator_digest_templates_by_channel_then_default_and_a_broken_one_falls_back(
    make_runtime: Callable[..., Runtime], sink: HttpSink, tmp_path: Path
) -> None:
    folder = tmp_path / "templates" / "_digest"
    folder.mkdir(parents=True)
    (folder / "owners-hook.txt.j2").write_text(
        "{% block title %}{{ items|length }} for {{ channel }} in {{ window }}{% endblock %}"
        "{% for i in items %}[{{ i.eventId }}|{{ i.kind }}|{{ i.recipient_type }}] {{ i.title }}\n{% endfor %}"
    )
    (folder / "default.txt.j2").write_text("{{ items | no_such_filter }}")
    rt = make_runtime(
        channels={"owners-hook": {"url": sink.url("/owners")}, "audit-hook": {"url": sink.url("/audit")}},
        routes=[
            {"recipient_types": [OWNERS], "channels": ["owners-hook"], "digest": "90s"},
            {"recipient_types": [REQUESTERS], "channels": ["audit-hook"], "digest": "90s"},
        ],
    )
    events = _accept(rt, _notification("m"), _notification("n"))
    _send_due(rt)
    [owners] = sink.at("/owners")
    assert owners.json()["title"] == "2 for owners-hook in 1m30s"
    assert owners.json()["message"].splitlines() == [
        f"[{events[0]}|notification:access-control-request-failed|{OWNERS}] m",
        f"[{events[1]}|notification:access-control-request-failed|{OWNERS}] n",
    ]
    [audit] = sink.at("/audit")  # the broken default: relay's own digest, and the fallback counted
    assert audit.json()["title"] == "2 notifications"
    assert "for the requester: n" in audit.json()["message"]
    assert (
        rt.store.counters().get("relay_template_fallbacks_total|kind=notification:access-control-request-failed", 0)
        >= 1
    )


def test_preview_says_a_delivery_joins_a_digest(make_runtime: Callable[..., Runtime]) -> None:
    from relay.cli.checks import check_intervals
    from relay.cli.preview import preview, preview_plan

    rt = make_runtime(routes=_routes({"window": "15m", "max_items": 20}))
    data = _notification("preview")
    [item] = [i for i in preview_plan(rt.config, data, clock=rt.clock) if i["channel"] == "owners-hook"]
    assert item["digest"] == {"window": "15m", "maxItems": 20}
    text = preview(preview_plan(rt.config, data, clock=rt.clock))
    assert "joins a digest" in text and "for 15m from the first (at most 20 a message)" in text
    notes = check_intervals(rt.config, clock=rt.clock)[1]
    assert "gathered: gathers its deliveries to each channel (each address, on a per-recipient channel) for 15m," in (
        " ".join(notes)
    )


def _worker(config: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [RELAY, "worker", "--config", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _config_file(rt: Runtime, tmp_path: Path) -> Path:
    path = tmp_path / "digest-config.json"
    path.write_text(json.dumps(rt.config.model_dump(mode="json", by_alias=True, exclude={"base_dir"})))
    return path


@pytest.mark.slow
def test_a_worker_process_sends_the_digest_when_its_real_window_ends(
    make_runtime: Callable[..., Runtime], sink: HttpSink, tmp_path: Path
) -> None:
    rt = make_runtime(routes=_routes("3s"))
    worker = _worker(_config_file(rt, tmp_path))
    try:
        started = time.time()
        with TestClient(create_app(rt)) as client:
            for title in ("w1", "w2", "w3"):
                assert post(client, _notification(title)).status_code == 202
        hit = wait_for(lambda: sink.at("/owners"), timeout=30)[0]
        assert time.time() - started >= 3.0
        assert hit.json()["title"] == "3 notifications"
        time.sleep(1.5)
        assert len(sink.at("/owners")) == 1
    finally:
        stop(worker)  # SIGTERM; SIGKILL after 30 s


@pytest.mark.slow  # a real window and a dead worker's leases, on a `relay worker` process's clock
def test_an_open_digest_survives_a_worker_killed_during_its_window(
    make_runtime: Callable[..., Runtime], sink: HttpSink, tmp_path: Path
) -> None:
    rt = make_runtime(routes=_routes("4s"), dead_worker_after="6s")  # the dead worker's leases, sooner
    config = _config_file(rt, tmp_path)
    worker = _worker(config)
    events: list[str] = []
    try:
        with TestClient(create_app(rt)) as client:
            for title in ("k1", "k2"):
                payload = _notification(title)
                events.append(payload["metadata"]["eventId"])
                assert post(client, payload).status_code == 202
        wait_for(lambda: all((r := _deliveries(rt, e)) and r[0].digest for e in events), timeout=20)
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(15)
    assert sink.at("/owners") == []
    # The killed worker's scheduler lets go of RQ's lock as it dies: the next worker then forks its own at start.
    lock = RQScheduler.get_locking_key(QUEUE_NAME)
    wait_for(lambda: not rt.redis.exists(lock), timeout=10)
    worker = _worker(config)
    try:
        hit = wait_for(lambda: sink.at("/owners"), timeout=60)[0]
        assert hit.json()["title"] == "2 notifications"
        wait_for(lambda: {_item(rt, e).state for e in events} == {"delivered"}, timeout=10)
        time.sleep(1)
        assert len(sink.at("/owners")) == 1
    finally:
        stop(worker)  # SIGTERM; SIGKILL after 30 s


def test_the_admin_page_says_what_a_digest_gathers_and_where_an_item_went(
    make_runtime: Callable[..., Runtime], sink: HttpSink
) -> None:
    rt = make_runtime(routes=_routes("15m"))
    events = _accept(rt, _notification("u1"), _notification("u2"))
    digest_id = _item(rt, events[0]).digest
    with TestClient(create_app(rt)) as client:
        page = admin(client, "/ui").text
    held = page.split('id="held"', 1)[1].split('id="events"', 1)[0]
    assert "digest of 2 gathering" in held and 'waits in its digest <a class="mono"' in held
    assert f">{digest_id}</a>" in held


def test_an_open_digest_survives_a_redis_restart(sink: HttpSink, smtp: SmtpSink, tmp_path: Path) -> None:
    """Redis killed (SIGKILL) and started again from its append-only file while a digest gathers: the
    digest is still open (a new delivery joins it), and it goes out once with everything it carried."""
    from redis import Redis

    from relay.core.clock import system_clock
    from relay.runtime.bootstrap import build
    from relay.runtime.embedded import EmbeddedRedis
    from tests.clock import ManualClock
    from tests.conftest import base_config

    server = EmbeddedRedis(tmp_path / "redis").start()
    try:
        conn = Redis.from_url(server.url, socket_timeout=2, socket_connect_timeout=1)
        config = base_config(sink, smtp, tmp_path, server.url, routes=_routes("1h"))
        rt = build(config, conn, clock=ManualClock(system_clock()))
        events = _accept(rt, _notification("before 1"), _notification("before 2"))
        digest_id = _item(rt, events[0]).digest
        time.sleep(1.2)  # the append-only file is synced each second
        kill(server)
        server.start()
        wait_for(lambda: conn.ping(), timeout=10)
        events += _accept(rt, _notification("after"))
        assert _item(rt, events[2]).digest == digest_id
        assert sink.at("/owners") == []
        _send_due(rt)
        [hit] = sink.at("/owners")
        assert hit.json()["title"] == "3 notifications"
        assert {_item(rt, e).state for e in events} == {"delivered"}
    finally:
        server.stop()


def test_a_transient_failure_retries_the_digest_and_its_items_follow_each_state(
    make_runtime: Callable[..., Runtime], sink: HttpSink
) -> None:
    rt = make_runtime(routes=_routes("5m"))
    events = _accept(rt, _notification("r1"), _notification("r2"))
    sink.script["/owners"] = [503]
    _send_due(rt)
    digest = _digest(rt, _item(rt, events[0]).digest or "")
    assert (digest.state, digest.attempts) == ("retrying", 1)
    assert {_item(rt, e).state for e in events} == {"retrying"}
    _send_due(rt)
    [hit] = sink.at("/owners")
    assert hit.json()["title"] == "2 notifications"
    assert (_digest(rt, digest.id).state, _digest(rt, digest.id).attempts) == ("delivered", 2)
    assert {_item(rt, e).attempts for e in events} == {2}  # the digest's tries are its items' tries
    assert {(_item(rt, e).state, _item(rt, e).lastError) for e in events} == {("delivered", None)}


@pytest.mark.parametrize("service", ["slack", "teams"])
def test_chat_digests_are_block_kit_for_slack_and_an_adaptive_card_for_teams(
    make_runtime: Callable[..., Runtime], service: str
) -> None:
    """Slack and Teams cannot be reached from here: `responses` intercepts Apprise's call."""
    import re

    import responses

    from tests.delivery.test_channels_native import SLACK_HOOK, SLACK_URL, TEAMS_URL

    url = SLACK_URL if service == "slack" else TEAMS_URL
    rt = make_runtime(channels={"chat": {"url": url}}, routes=_routes("5m", channel="chat"), default={"channels": []})
    _accept(rt, _notification("first *thing*"), _notification("second"))
    with responses.RequestsMock() as http:
        target = SLACK_HOOK if service == "slack" else re.compile(r"https://prod-01\.westeurope\.logic\.azure\.com.*")
        http.add(responses.POST, target, body="ok")
        _send_due(rt)
        [call] = http.calls
        body = json.loads(call.request.body or b"{}")
    if service == "slack":
        blocks = body["attachments"][0]["blocks"]
        assert blocks[0] == {"type": "header", "text": {"type": "plain_text", "text": "2 notifications", "emoji": True}}
        text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z", "T", blocks[1]["text"]["text"])
        # Slack mrkdwn, converted by Apprise from relay's Markdown digest (items' own Markdown kept as such).
        assert text == (
            "*1. first _thing_*\ntext of first _thing_\n_received T_\n\n*2. second*\ntext of second\n_received T_"
        )
    else:
        card = body["attachments"][0]["content"]
        assert card["type"] == "AdaptiveCard"
        shown = json.dumps(card)
        assert "2 notifications" in shown and shown.index("first") < shown.index("second")


def test_a_digest_given_up_after_crashes_fails_with_its_items(make_runtime: Callable[..., Runtime]) -> None:
    from relay.delivery.jobs import give_up

    rt = make_runtime(routes=_routes("5m"))
    events = _accept(rt, _notification("c1"), _notification("c2"))
    digest_id = _item(rt, events[0]).digest or ""
    give_up(rt, digest_id, "the delivery crashed or timed out on every try (RuntimeError)")
    assert _digest(rt, digest_id).state == "failed"
    assert {(_item(rt, e).state, _item(rt, e).lastError) for e in events} == {
        ("failed", f"digest {digest_id}: the delivery crashed or timed out on every try (RuntimeError)")
    }
