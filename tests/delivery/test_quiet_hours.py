"""Quiet hours end to end: a route's time intervals hold a delivery (state `held`, `notBefore`) as an RQ
scheduled job and a record; the job sends it once the interval lets it (under the config as it is then);
release by the API and the CLI sends it now, once. Real Redis, real RQ, real SMTP and HTTP sinks; the
clock is the runtime's own (`Runtime.clock`), set by each test."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rq import Queue
from rq.registry import ScheduledJobRegistry
from starlette.testclient import TestClient

from relay.cli import main
from relay.config import Config
from relay.delivery.holding import SETTLE_SECONDS
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.storage.leases import READY
from relay.storage.work_queue import QUEUE_NAME
from tests.conftest import ADMIN_TOKEN, admin, post, run_scheduled, run_worker, sample_notification
from tests.processes import stop
from tests.servers import HttpSink, SmtpSink, wait_for

pytestmark = pytest.mark.dated

RELAY = str(Path(sys.executable).parent / "relay")
OFFICE_HOURS = {
    "name": "office-hours",
    "time_intervals": [
        {
            "weekdays": ["monday:friday"],
            "times": [{"start_time": "08:00", "end_time": "18:00"}],
            "location": "Europe/Rome",
        }
    ],
}
# All of Friday 27 November 2026 in Rome.
FREEZE = {
    "name": "change-freeze",
    "time_intervals": [{"years": [2026], "months": ["november"], "days_of_month": [27], "location": "Europe/Rome"}],
}
FRIDAY_EVENING = datetime(2026, 11, 27, 17, 30, tzinfo=UTC).timestamp()  # 18:30 in Rome
MONDAY_8 = "2026-11-30T07:00:00.000Z"  # 08:00 in Rome
SATURDAY = "2026-11-27T23:00:00.000Z"  # midnight in Rome, when the freeze ends
MONDAY_FREEZE = {
    "name": "change-freeze",
    "time_intervals": [{"years": [2026], "months": ["november"], "days_of_month": [30], "location": "Europe/Rome"}],
}
TUESDAY = "2026-11-30T23:00:00.000Z"  # midnight in Rome, when the Monday freeze ends


def _routes(**email_route: Any) -> list[dict[str, Any]]:
    return [
        {
            "kinds": ["notification:access-control-*"],
            "recipient_types": ["recipient-type:system-owner"],
            "channels": ["owners-hook"],
        },
        {"recipient_types": ["recipient-type:project-data-access-manager"], "channels": ["managers-hook"]},
        {
            "name": "requester",
            "recipient_types": ["recipient-type:access-control-requester"],
            "channels": ["requester-email"],
            **email_route,
        },
    ]


@pytest.fixture
def quiet(make_runtime: Callable[..., Runtime]) -> Runtime:
    rt = make_runtime(time_intervals=[OFFICE_HOURS, FREEZE], routes=_routes(active_time_intervals=["office-hours"]))
    rt.clock.set(FRIDAY_EVENING)
    return rt


def _new_config(make_runtime: Callable[..., Runtime], rt: Runtime, **settings: Any) -> Config:
    """A config as a reload would read it; `rt` stays the runtime jobs use."""
    config = make_runtime(**settings).config
    return config


def _email(rt: Runtime, event_id: str) -> Any:
    [record] = [
        r for r in rt.store.deliveries(rt.store.event_delivery_ids(event_id)) if r and r.channel == "requester-email"
    ]
    return record


def _scheduled(rt: Runtime) -> dict[str, datetime]:
    registry = ScheduledJobRegistry(queue=Queue(QUEUE_NAME, connection=rt.redis))
    return {i: registry.get_scheduled_time(i) for i in registry.get_job_ids()}


def _accept(rt: Runtime) -> str:
    payload = sample_notification()
    with TestClient(create_app(rt)) as client:
        assert post(client, payload).status_code == 202
    run_worker(rt)
    return str(payload["metadata"]["eventId"])


def _config_file(rt: Runtime, tmp_path: Path) -> Path:
    path = tmp_path / "quiet-config.json"
    path.write_text(json.dumps(rt.config.model_dump(mode="json", by_alias=True, exclude={"base_dir"})))
    return path


def test_held_at_planning_until_the_interval_opens(
    quiet: Runtime, sink: HttpSink, smtp: SmtpSink, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    event_id = _accept(quiet)
    # The routes without intervals sent at once; the e-mail waits for Monday 08:00 in Rome.
    assert len(sink.at("/owners")) == 1 and len(sink.at("/managers")) == 1
    assert smtp.mails == []
    email = _email(quiet, event_id)
    assert email.state == "held"
    assert email.public()["notBefore"] == MONDAY_8
    # Due at Monday 08:00 among the deliveries to send, with an RQ scheduled wake-up then.
    assert quiet.redis.zscore(READY, email.id) == email.notBefore
    assert _scheduled(quiet) == {f"relay-wake-at-{int(email.notBefore)}": datetime(2026, 11, 30, 7, 0, tzinfo=UTC)}

    with TestClient(create_app(quiet)) as client:
        listed = admin(client, "/api/v1/deliveries?state=held").json()
        assert [(d["id"], d["state"], d["notBefore"]) for d in listed] == [(email.id, "held", MONDAY_8)]
        event = admin(client, f"/api/v1/events/{event_id}").json()
        assert {d["state"] for d in event["deliveries"]} == {"delivered", "held"}
        metrics = client.get("/metrics").text
    held_lines = [
        line for line in metrics.splitlines() if line.startswith("relay_deliveries_total{") and 'state="held"' in line
    ]
    assert len(held_lines) == 1 and held_lines[0].endswith(" 1.0"), held_lines
    assert "relay_deliveries_held 1.0" in metrics.splitlines()

    config = str(_config_file(quiet, tmp_path))
    assert main(["deliveries", "--state", "held", "--json", "--config", config]) == 0
    assert [d["id"] for d in json.loads(capsys.readouterr().out)] == [email.id]
    assert main(["status", event_id, "--config", config]) == 0
    status = capsys.readouterr().out
    assert "notBefore" in status.splitlines()[1] and MONDAY_8 in status


def test_a_wake_up_before_the_interval_opens_takes_nothing_and_after_it_sends_once(
    quiet: Runtime, smtp: SmtpSink
) -> None:
    event_id = _accept(quiet)
    # A worker woken an hour later (other work): the held delivery is not due on the one clock, nothing sent.
    quiet.clock.set(FRIDAY_EVENING + 3600)
    quiet.work.request_wake()
    run_worker(quiet)
    assert _email(quiet, event_id).state == "held" and smtp.mails == []
    assert len(_scheduled(quiet)) == 1  # its own wake-up still waits
    # Monday 08:00 in Rome: the scheduled job sends it, once.
    quiet.clock.set(datetime(2026, 11, 30, 7, 0, 1, tzinfo=UTC).timestamp())
    assert run_scheduled(quiet) == 1
    run_worker(quiet)
    assert [m.envelope_to for m in smtp.mails] == [["alice.rossi@example.com"]]
    email = _email(quiet, event_id)
    assert (email.state, email.attempts, email.public()["notBefore"]) == ("delivered", 1, MONDAY_8)
    run_scheduled(quiet)
    run_worker(quiet)
    assert len(smtp.mails) == 1


def test_a_reload_re_plans_a_held_delivery_under_the_new_intervals(
    quiet: Runtime, make_runtime: Callable[..., Runtime], smtp: SmtpSink
) -> None:
    event_id = _accept(quiet)
    # The new config mutes the whole Monday instead: when the wake-up comes (Monday 08:00), the hold is asked
    # again, under the config as it is then.
    quiet.loaded = replace(
        quiet.loaded,
        config=_new_config(
            make_runtime, quiet, time_intervals=[MONDAY_FREEZE], routes=_routes(mute_time_intervals=["change-freeze"])
        ),
    )
    run_scheduled(quiet)
    run_worker(quiet)
    email = _email(quiet, event_id)
    assert (email.state, email.public()["notBefore"]) == ("held", TUESDAY)
    # With no interval on the route any more, the next wake-up sends it.
    quiet.loaded = replace(quiet.loaded, config=_new_config(make_runtime, quiet, routes=_routes()))
    run_scheduled(quiet)
    run_worker(quiet)
    assert _email(quiet, event_id).state == "delivered" and len(smtp.mails) == 1


def test_a_mute_interval_holds_and_release_by_api_sends_once(
    make_runtime: Callable[..., Runtime], smtp: SmtpSink
) -> None:
    rt = make_runtime(time_intervals=[FREEZE], routes=_routes(mute_time_intervals=["change-freeze"]))
    rt.clock.set(FRIDAY_EVENING)
    event_id = _accept(rt)
    email = _email(rt, event_id)
    assert (email.state, email.public()["notBefore"]) == ("held", SATURDAY)
    with TestClient(create_app(rt)) as client:
        refused = client.post(
            "/api/v1/deliveries/release",
            content=b"eventId=x",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/x-www-form-urlencoded"},
        )
        assert refused.status_code == 415
        dry = admin(client, "/api/v1/deliveries/release", "POST", json={"eventId": event_id, "dryRun": True})
        assert dry.json() == {"released": 1, "dryRun": True, "notReleased": []}
        assert _email(rt, event_id).state == "held"
        answer = admin(client, "/api/v1/deliveries/release", "POST", json={"ids": [email.id, "nope"]})
        assert answer.status_code == 200
        assert answer.json() == {"released": 1, "dryRun": False, "notReleased": [{"id": "nope", "state": "unknown"}]}
        again = admin(client, "/api/v1/deliveries/release", "POST", json={"eventId": event_id})
        assert again.json()["released"] == 0
        run_worker(rt)
        assert [m.envelope_to for m in smtp.mails] == [["alice.rossi@example.com"]]
        assert _email(rt, event_id).state == "delivered"
        # The scheduled wake-up still comes: it finds the delivery sent.
        assert run_scheduled(rt) == 1
        run_worker(rt)
        assert len(smtp.mails) == 1
        metrics = client.get("/metrics").text.splitlines()
        assert "relay_releases_total 1.0" in metrics and "relay_deliveries_held 0.0" in metrics


def test_release_by_cli_sends_once(
    make_runtime: Callable[..., Runtime], smtp: SmtpSink, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rt = make_runtime(time_intervals=[FREEZE], routes=_routes(mute_time_intervals=["change-freeze"]))
    rt.clock.set(FRIDAY_EVENING)
    event_id = _accept(rt)
    config = str(_config_file(rt, tmp_path))
    assert main(["release", "--channel", "owners-hook", "--config", config], clock=rt.clock) == 0
    assert "released 0 held deliveries" in capsys.readouterr().out
    assert main(["release", "--event", event_id, "--dry-run", "--config", config], clock=rt.clock) == 0
    assert f"held until {SATURDAY}" in capsys.readouterr().out
    assert (
        main(["release", "--event", event_id, "--kind", "notification:access-*", "--config", config], clock=rt.clock)
        == 0
    )
    assert "released 1 held delivery: they go out now" in capsys.readouterr().out
    run_worker(rt)
    assert len(smtp.mails) == 1 and _email(rt, event_id).state == "delivered"
    run_scheduled(rt)
    run_worker(rt)
    assert len(smtp.mails) == 1


@pytest.mark.slow
def test_a_held_delivery_is_sent_by_a_new_worker_process_after_its_interval_closed(
    make_runtime: Callable[..., Runtime], smtp: SmtpSink, tmp_path: Path
) -> None:
    """Held on a Friday of 2025 (the past); relay was down when the freeze ended. A worker process started
    later (nothing of the planning process survives but Redis) finds the scheduled job due and sends the
    delivery, once."""
    past_freeze = {**FREEZE, "time_intervals": [{"years": [2025], "months": [11], "days_of_month": [21]}]}
    rt = make_runtime(time_intervals=[past_freeze], routes=_routes(mute_time_intervals=["change-freeze"]))
    rt.clock.set(datetime(2025, 11, 21, 12, 0, tzinfo=UTC).timestamp())
    event_id = _accept(rt)
    email = _email(rt, event_id)
    assert (email.state, email.public()["notBefore"], smtp.mails) == ("held", "2025-11-22T00:00:00.000Z", [])
    config = _config_file(rt, tmp_path)
    worker = subprocess.Popen(
        [RELAY, "worker", "--config", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for(lambda: _email(rt, event_id).state == "delivered", timeout=30)
    finally:
        stop(worker)  # SIGTERM; SIGKILL after 30 s
    assert [m.envelope_to for m in smtp.mails] == [["alice.rossi@example.com"]]
    assert _scheduled(rt) == {}


def test_preview_says_when_each_delivery_goes_out(
    quiet: Runtime, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps(sample_notification()))
    config = str(_config_file(quiet, tmp_path))
    assert main(["preview", str(payload), "--config", config, "--at", "2026-11-27T17:30:00Z"]) == 0
    out = capsys.readouterr().out
    assert f"held until {MONDAY_8} (the route's time intervals)" in out
    assert out.count("held until") == 1
    assert main(["preview", str(payload), "--config", config, "--at", "2026-11-30T07:00:00Z", "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)["deliveries"]
    email = [d for d in plan if d["channel"] == "requester-email"]
    assert [(d["state"], d.get("quietHours")) for d in email] == [
        ("would send", "inside the route's time intervals: goes out now")
    ]


def test_the_admin_page_says_until_when_a_delivery_is_held(quiet: Runtime) -> None:
    event_id = _accept(quiet)
    with TestClient(create_app(quiet)) as client:
        page = client.get("/ui", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert page.status_code == 200, page.text[:300]
    assert event_id in page.text
    held = page.text.split('id="held"', 1)[1].split('id="events"', 1)[0]  # the held section says why, and when
    assert event_id in held and "quiet hours" in held and f'datetime="{MONDAY_8}"' in held


def test_a_reload_that_lets_a_held_delivery_go_sooner_moves_its_wake_up(
    quiet: Runtime, smtp: SmtpSink, tmp_path: Path
) -> None:
    event_id = _accept(quiet)
    assert _email(quiet, event_id).public()["notBefore"] == MONDAY_8
    # The new file takes the office hours off the e-mail route: it goes once every worker has reloaded.
    path = tmp_path / "reloaded.json"
    data = quiet.config.model_dump(mode="json", by_alias=True, exclude={"base_dir"})
    data["routes"] = _routes()
    path.write_text(json.dumps(data))
    quiet.config_file = path
    with TestClient(create_app(quiet)) as client:
        assert admin(client, "/api/v1/reload", "POST").status_code == 200
        email = _email(quiet, event_id)
        assert (email.state, email.notBefore) == ("held", FRIDAY_EVENING + SETTLE_SECONDS)
        assert sorted(_scheduled(quiet).values()) == [
            datetime.fromtimestamp(FRIDAY_EVENING + SETTLE_SECONDS, UTC),
            datetime(2026, 11, 30, 7, 0, tzinfo=UTC),
        ]
        quiet.clock.set(FRIDAY_EVENING + SETTLE_SECONDS + 1)
        assert run_scheduled(quiet) == 2  # the new wake-up sends it, the old one finds it sent
        run_worker(quiet)
        assert [m.envelope_to for m in smtp.mails] == [["alice.rossi@example.com"]]
        assert _email(quiet, event_id).state == "delivered"
        assert "relay_deliveries_held 0.0" in client.get("/metrics").text.splitlines()


def test_planning_again_after_a_crash_schedules_the_held_wake_up_once(quiet: Runtime) -> None:
    from tests.conftest import plan_job

    event_id = _accept(quiet)
    email = _email(quiet, event_id)
    before = _scheduled(quiet)
    # A crash between storing the records and scheduling the wake-up: RQ runs the planning job again.
    ScheduledJobRegistry(queue=Queue(QUEUE_NAME, connection=quiet.redis)).remove(next(iter(before)), delete_job=True)
    assert _scheduled(quiet) == {}
    plan_job(quiet, event_id)
    plan_job(quiet, event_id)
    assert quiet.sender.drain(10)  # the deliveries sent before: found sent again, nothing more
    assert _scheduled(quiet) == before
    assert _email(quiet, event_id) == email


@pytest.mark.slow
def test_a_mute_interval_that_closes_at_a_whole_minute_sends_then_by_a_worker_process(
    make_runtime: Callable[..., Runtime], smtp: SmtpSink, tmp_path: Path
) -> None:
    """Real clocks throughout: a `relay worker` process plans the notification inside a mute interval that
    ends at a whole minute (UTC), and RQ's scheduler, forked by that process, sends it then, once."""
    import math
    import time

    # The interval ends at a whole minute 45 to 105 s away: room for the worker to start on a loaded machine
    # (it is ready before the notification is posted) and to plan inside it.
    start = datetime.now(UTC).replace(second=0, microsecond=0)
    midnight = start.replace(hour=0, minute=0).timestamp() + 86400  # a time of day cannot reach past it
    end = min(math.ceil((time.time() + 45) / 60) * 60, midnight)
    minute = {
        "start_time": start.strftime("%H:%M"),
        "end_time": "24:00" if end == midnight else datetime.fromtimestamp(end, UTC).strftime("%H:%M"),
    }
    now_muted = {"name": "this-minute", "time_intervals": [{"times": [minute]}]}
    rt = make_runtime(time_intervals=[now_muted], routes=_routes(mute_time_intervals=["this-minute"]))
    worker = subprocess.Popen(
        [RELAY, "worker", "--config", str(_config_file(rt, tmp_path))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        payload = sample_notification()
        event_id = payload["metadata"]["eventId"]
        with TestClient(create_app(rt)) as client:
            wait_for(lambda: client.get("/readyz").status_code == 200, timeout=40)  # the worker beats
            assert post(client, payload).status_code == 202
        email = wait_for(lambda: (r := _email_or_none(rt, event_id)) and r.state == "held" and r, timeout=20)
        assert email.notBefore == end and smtp.mails == []
        wait_for(lambda: _email(rt, event_id).state == "delivered", timeout=end - time.time() + 20)
        assert time.time() >= end
    finally:
        stop(worker)  # SIGTERM; SIGKILL after 30 s
    assert [m.envelope_to for m in smtp.mails] == [["alice.rossi@example.com"]]


def _email_or_none(rt: Runtime, event_id: str) -> Any:
    found = [
        r for r in rt.store.deliveries(rt.store.event_delivery_ids(event_id)) if r and r.channel == "requester-email"
    ]
    return found[0] if found else None
