"""People's preferences end to end: the app, real RQ workers of relay's own, a real SMTP server and the HTTP
sink. One-click unsubscribe from the e-mail's own headers, the confirmation page and its undo, critical
kinds, active hours (the runtime's clock set by the test), the preference page's form, signed links refused,
the admin API, and a change that the next notification obeys on another worker."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from starlette.testclient import TestClient

from relay.cli import main
from relay.delivery.holding import replan_held
from relay.preferences.store import PREFERENCES, preference_key
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from tests.conftest import ADMIN_TOKEN, admin, post, run_scheduled, run_worker, sample_notification
from tests.servers import HttpSink, SmtpSink

pytestmark = pytest.mark.dated

SECRET = "a-secret-of-at-least-thirty-two-bytes!"
PUBLIC = "http://testserver"
ALICE = "user:default/alice.rossi"
KIND = "notification:access-control-request-failed"
FRIDAY_EVENING = datetime(2026, 11, 27, 17, 30, tzinfo=UTC).timestamp()  # 18:30 in Rome
MONDAY_8 = "2026-11-30T07:00:00.000Z"  # 08:00 in Rome
OFFICE = [
    {"weekdays": ["monday:friday"], "times": [{"start_time": "08:00", "end_time": "18:00"}], "location": "Europe/Rome"}
]
CSRF = re.compile(r'name="csrf" value="([0-9a-f]{64})"')


def _settings(tmp_path: Path, **preferences: Any) -> dict[str, Any]:
    return {
        "preferences": {"public_url": PUBLIC, "secret": SECRET, **preferences},
        "templates": {"dir": str(tmp_path / "templates"), "builtin": True},
    }


@pytest.fixture
def prt(make_runtime: Callable[..., Runtime], tmp_path: Path) -> Runtime:
    return make_runtime(**_settings(tmp_path))


def _send(rt: Runtime, client: TestClient, **overrides: Any) -> str:
    payload = sample_notification(**overrides)
    assert post(client, payload).status_code == 202
    run_worker(rt)
    return str(payload["metadata"]["eventId"])


def _email(rt: Runtime, event_id: str) -> Any:
    [record] = [
        r for r in rt.store.deliveries(rt.store.event_delivery_ids(event_id)) if r and r.channel == "requester-email"
    ]
    return record


def _path(url: str) -> str:
    return urlsplit(url).path


def _prefs(client: TestClient, person: str = ALICE) -> dict[str, Any]:
    answer = admin(client, f"/api/v1/people/{quote(person, safe='')}/preferences")
    assert answer.status_code == 200
    return dict(answer.json())


def test_one_click_unsubscribe_from_the_email_headers_then_undo(prt: Runtime, smtp: SmtpSink, sink: HttpSink) -> None:
    with TestClient(create_app(prt)) as client:
        _send(prt, client)
        [mail] = smtp.mails
        # RFC 8058, per delivery: a link for this person, this kind, this channel.
        header = str(mail.message["List-Unsubscribe"])
        assert header.startswith(f"<{PUBLIC}/unsubscribe/") and header.endswith(">")
        assert str(mail.message["List-Unsubscribe-Post"]) == "List-Unsubscribe=One-Click"
        unsubscribe = _path(header[1:-1])
        # relay's own e-mail ends with the person's page, in both parts.
        html, text = mail.part("text/html") or "", mail.part("text/plain") or ""
        assert "Manage your notifications" in html and f"{PUBLIC}/preferences/" in html
        assert re.search(rf"Manage your notifications: {PUBLIC}/preferences/\S+", text), text

        # A GET (a mail scanner) changes nothing: it shows a button.
        confirm = client.get(unsubscribe)
        assert confirm.status_code == 200 and "Unsubscribe?" in confirm.text
        assert 'name="List-Unsubscribe" value="One-Click"' in confirm.text
        assert confirm.headers["referrer-policy"] == "same-origin"
        assert _prefs(client)["optOuts"] == []

        # The one-click POST, bare as mail providers send it; twice: one opt-out.
        for _ in range(2):
            done = client.post(unsubscribe, data={"List-Unsubscribe": "One-Click"})
            assert done.status_code == 200 and "You are unsubscribed" in done.text
        assert _prefs(client)["optOuts"] == [{"kind": KIND, "channel": "requester-email"}]

        # The next notification: the e-mail is skipped with a reason, the rest is sent.
        sink.clear()
        event_id = _send(prt, client)
        assert len(smtp.mails) == 1
        assert len(sink.at("/owners")) == 1 and len(sink.at("/managers")) == 1
        event = admin(client, f"/api/v1/events/{event_id}").json()
        [email] = [d for d in event["deliveries"] if d["channel"] == "requester-email"]
        assert email["state"] == "skipped"
        assert email["lastError"] == f"opted out of {KIND} on requester-email"
        metrics = client.get("/metrics").text
        assert re.search(
            r'^relay_preference_skips_total\{channel="requester-email",kind="notification:access-control-request-failed"\}'
            r" 1\.0$",
            metrics,
            re.M,
        ), metrics

        # Undo, from the page (guarded against forgery): the third one reaches her again.
        page = client.get(unsubscribe)
        assert "Undo" in page.text
        csrf = CSRF.search(page.text)
        assert csrf is not None
        forged = client.post(unsubscribe, data={"undo": "1", "csrf": "0" * 64})
        assert forged.status_code == 403
        assert _prefs(client)["optOuts"] != []
        undone = client.post(unsubscribe, data={"undo": "1", "csrf": csrf.group(1)})
        assert undone.status_code == 200 and "subscribed again" in undone.text
        assert _prefs(client)["optOuts"] == []
        _send(prt, client)
        assert len(smtp.mails) == 2


def test_the_platform_text_gets_the_headers_too_and_no_links_without_a_public_url(
    make_runtime: Callable[..., Runtime], smtp: SmtpSink
) -> None:
    rt = make_runtime(preferences={"public_url": PUBLIC, "secret": SECRET})  # relay's templates off
    with TestClient(create_app(rt)) as client:
        _send(rt, client)
    assert str(smtp.mails[0].message["List-Unsubscribe"]).startswith(f"<{PUBLIC}/unsubscribe/")
    smtp.clear()
    plain = make_runtime()
    with TestClient(create_app(plain)) as client:
        _send(plain, client)
        assert admin(client, f"/api/v1/people/{quote(ALICE, safe='')}/link").status_code == 409
    assert smtp.mails[0].message["List-Unsubscribe"] is None
    assert "Manage your notifications" not in (smtp.mails[0].part("text/html") or "")


def test_tampered_foreign_and_expired_links_are_refused_and_change_nothing(prt: Runtime, smtp: SmtpSink) -> None:
    with TestClient(create_app(prt)) as client:
        _send(prt, client)
        unsubscribe = _path(str(smtp.mails[0].message["List-Unsubscribe"])[1:-1])
        token = unsubscribe.rsplit("/", 1)[1]
        body, _, mac = token.partition(".")
        tampered = f"/unsubscribe/{body[:-2]}xx.{mac}"
        for path, status in ((tampered, 403), (f"/preferences/{token}", 403), ("/preferences/garbage", 403)):
            answer = client.post(path, data={"List-Unsubscribe": "One-Click"})
            assert answer.status_code == status, path
            error = answer.json()
            assert set(error) >= {"errors", "userMessage", "moreInfo"}
            assert ALICE not in answer.text and "alice" not in answer.text.lower()
        # A browser gets the same refusal as a page.
        page = client.get(tampered, headers={"Accept": "text/html"})
        assert page.status_code == 403 and "not valid" in page.text
        # Past link_ttl (90 days by default): 410, nothing changed.
        was = prt.clock()
        prt.clock.set(FRIDAY_EVENING + 1e10)
        expired = client.post(unsubscribe, data={"List-Unsubscribe": "One-Click"})
        assert expired.status_code == 410 and expired.json()["errors"] == ["expired link"]
        prt.clock.set(was)
        assert _prefs(client)["optOuts"] == []


def test_critical_kinds_reach_a_person_who_opted_out(
    make_runtime: Callable[..., Runtime], tmp_path: Path, smtp: SmtpSink
) -> None:
    rt = make_runtime(**_settings(tmp_path, critical_kinds=["notification:access-control-*"]))
    with TestClient(create_app(rt)) as client:
        put = admin(
            client,
            f"/api/v1/people/{quote(ALICE, safe='')}/preferences",
            "PUT",
            json={"optOuts": [{"kind": "*", "channel": "*"}], "activeHours": OFFICE},
        )
        assert put.status_code == 200
        rt.clock.set(FRIDAY_EVENING)  # outside her hours too
        event_id = _send(rt, client)
    assert _email(rt, event_id).state == "delivered"
    assert [m.envelope_to for m in smtp.mails] == [["alice.rossi@example.com"]]
    # Nothing to unsubscribe from: no one-click header; her page is still linked.
    assert smtp.mails[0].message["List-Unsubscribe"] is None
    assert "Manage your notifications" in (smtp.mails[0].part("text/html") or "")


def test_outside_active_hours_the_email_is_held_until_they_open(prt: Runtime, smtp: SmtpSink) -> None:
    prt.clock.set(FRIDAY_EVENING)
    with TestClient(create_app(prt)) as client:
        put = admin(client, f"/api/v1/people/{quote(ALICE, safe='')}/preferences", "PUT", json={"activeHours": OFFICE})
        assert put.status_code == 200 and put.json()["activeHours"] == OFFICE
        event_id = _send(prt, client)
        email = _email(prt, event_id)
        assert email.state == "held" and email.public()["notBefore"] == MONDAY_8
        assert smtp.mails == []
        held = admin(client, "/api/v1/deliveries?state=held").json()
        assert [d["id"] for d in held] == [email.id]
    # A config reload re-plans held deliveries under the routes' intervals: hers still waits for her hours.
    assert replan_held(prt) == 0
    assert _email(prt, event_id).public()["notBefore"] == MONDAY_8
    # Monday 08:00 in Rome: the wake-up sends it, once.
    prt.clock.set(datetime(2026, 11, 30, 7, 0, 1, tzinfo=UTC).timestamp())
    assert run_scheduled(prt) == 1
    run_worker(prt)
    assert [m.envelope_to for m in smtp.mails] == [["alice.rossi@example.com"]]
    assert _email(prt, event_id).state == "delivered"


def test_a_route_holding_later_than_the_person_wins(make_runtime: Callable[..., Runtime], tmp_path: Path) -> None:
    tuesday = {"name": "tuesday", "time_intervals": [{"weekdays": ["tuesday"]}]}
    routes = [
        {
            "recipient_types": ["recipient-type:access-control-requester"],
            "channels": ["requester-email"],
            "active_time_intervals": ["tuesday"],
        },
    ]
    rt = make_runtime(**_settings(tmp_path), time_intervals=[tuesday], routes=routes)
    rt.clock.set(FRIDAY_EVENING)
    with TestClient(create_app(rt)) as client:
        admin(client, f"/api/v1/people/{quote(ALICE, safe='')}/preferences", "PUT", json={"activeHours": OFFICE})
        event_id = _send(rt, client)
    # The person's Monday 08:00 is earlier than the route's Tuesday 00:00 UTC (01:00 in Rome: outside her
    # hours), so the delivery waits for Tuesday 08:00 in Rome, when both let it go.
    assert _email(rt, event_id).public()["notBefore"] == "2026-12-01T07:00:00.000Z"


def test_a_change_takes_effect_for_the_next_notification_on_another_worker(
    make_runtime: Callable[..., Runtime], tmp_path: Path, smtp: SmtpSink
) -> None:
    api = make_runtime(**_settings(tmp_path))
    worker = make_runtime(**_settings(tmp_path))  # another process's runtime, bound for the jobs
    with TestClient(create_app(api)) as client:
        first = _send(worker, client)
        assert _email(worker, first).state == "delivered"
        answer = admin(
            client,
            f"/api/v1/people/{quote(ALICE, safe='')}/preferences",
            "PUT",
            json={"optOuts": [{"kind": "access-control-*", "channel": "requester-email"}]},
        )
        assert answer.status_code == 200
        second = _send(worker, client)
    record = _email(worker, second)
    assert (record.state, record.lastError) == ("skipped", "opted out of access-control-* on requester-email")
    assert len(smtp.mails) == 1


def test_the_admin_api_answers_and_refuses_with_the_field(prt: Runtime) -> None:
    person = quote("Bruno.Verdi@Example.com".lower(), safe="")
    with TestClient(create_app(prt)) as client:
        empty = _prefs(client, "bruno.verdi@example.com")
        assert empty == {"person": "bruno.verdi@example.com", "optOuts": [], "activeHours": None, "updatedAt": None}
        bad = admin(
            client, f"/api/v1/people/{person}/preferences", "PUT", json={"optOuts": [{"kind": "x", "channel": "nope"}]}
        )
        assert bad.status_code == 422 and bad.json()["inputErrorField"] == "optOuts.0.channel"
        bad = admin(
            client, f"/api/v1/people/{person}/preferences", "PUT", json={"activeHours": [{"location": "Nowhere/X"}]}
        )
        assert bad.status_code == 422 and bad.json()["inputErrorField"] == "activeHours.0.location"
        too_big = client.put(
            f"/api/v1/people/{person}/preferences",
            content=b"x" * 70_000,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        assert too_big.status_code == 413
        assert client.get(f"/api/v1/people/{person}/preferences").status_code == 401  # the admin token
        link = admin(client, f"/api/v1/people/{person}/link").json()["preferencesUrl"]
        assert link.startswith(f"{PUBLIC}/preferences/")
        page = client.get(_path(link))
        assert page.status_code == 200 and "bruno.verdi@example.com" in page.text


def test_the_preference_page_lists_what_was_sent_and_saves_with_its_token(prt: Runtime, smtp: SmtpSink) -> None:
    with TestClient(create_app(prt)) as client:
        _send(prt, client)
        link = re.search(rf"{PUBLIC}(/preferences/[A-Za-z0-9_.-]+)", smtp.mails[0].part("text/plain") or "")
        assert link is not None
        path = link.group(1)
        page = client.get(path)
        assert page.status_code == 200
        assert "Access control request failed" in page.text and "Requester email · 1 in 30 days" in page.text
        # Names people know: hers as the payload gave it, the channel's label; no ref, no channel name.
        assert "For <strong>Alice Rossi</strong>" in page.text
        assert ALICE not in page.text and "requester-email" not in page.text
        # The time zone is a choice from the IANA list, UTC (hers, none set yet) chosen.
        assert '<select id="zone" name="zone">' in page.text and '<option value="UTC" selected>' in page.text
        assert '<option value="Europe/Rome">Europe/Rome</option>' in page.text
        assert "bruno" not in page.text.lower()  # nobody else's data: the owner got this notification too
        row = re.search(r'name="row" value="([0-9a-f]{16})"', page.text)
        csrf = CSRF.search(page.text)
        assert row is not None and csrf is not None
        form = {
            "row": row.group(1),
            "hours": "set",
            "day": ["monday", "tuesday"],
            "start": "22:00",
            "end": "06:00",
            "zone": "Europe/Rome",
        }
        # Without its token, or from another site: refused, nothing saved.
        assert client.post(path, data=form).status_code == 403
        other = client.post(path, data={**form, "csrf": csrf.group(1)}, headers={"Origin": "https://evil.example"})
        assert other.status_code == 403
        assert _prefs(client)["optOuts"] == []
        too_big = client.post(path, data={**form, "csrf": csrf.group(1), "x": "y" * 20_000})
        assert too_big.status_code == 413
        # The switch off (an unchecked box is not sent), overnight hours on two days.
        saved = client.post(path, data={**form, "csrf": csrf.group(1)}, follow_redirects=False)
        assert saved.status_code == 303 and saved.headers["location"].endswith("?saved=1")
        stored = _prefs(client)
        assert stored["optOuts"] == [{"kind": KIND, "channel": "requester-email"}]
        assert stored["activeHours"] == [
            {
                "times": [{"start_time": "22:00", "end_time": "24:00"}, {"start_time": "00:00", "end_time": "06:00"}],
                "weekdays": ["monday", "tuesday"],
                "location": "Europe/Rome",
            }
        ]
        again = client.get(path + "?saved=1")
        assert "Saved." in again.text and 'value="22:00"' in again.text and 'value="06:00"' in again.text
        assert '<option value="Europe/Rome" selected>' in again.text
        # A time zone that is not in the list: 422, the page says why, nothing changes.
        for zone in ("Mars/Base", "../../etc/passwd", "localtime"):
            wrong = client.post(path, data={**form, "csrf": csrf.group(1), "zone": zone})
            assert wrong.status_code == 422 and "is not one of the list" in wrong.text, zone
            assert "For <strong>Alice Rossi</strong>" in wrong.text
        assert _prefs(client)["activeHours"] == stored["activeHours"]


def test_export_and_import_round_trip_every_preference(
    prt: Runtime, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "prefs-config.json"
    config.write_text(json.dumps(prt.config.model_dump(mode="json", by_alias=True, exclude={"base_dir"})))
    args = ["--config", str(config)]
    assert (
        main(["prefs", "set", ALICE, "--off", "notification:output-port-*", "--channel", "requester-email", *args]) == 0
    )
    assert main(["prefs", "set", "carla@example.com", "--off", "notification:*", *args]) == 0
    with TestClient(create_app(prt)) as client:
        admin(
            client,
            f"/api/v1/people/{quote(ALICE, safe='')}/preferences",
            "PUT",
            json={"optOuts": _prefs(client)["optOuts"], "activeHours": OFFICE},
        )
        before = {p: _prefs(client, p) for p in (ALICE, "carla@example.com")}
    assert main(["prefs", "set", ALICE, "--off", "x", "--channel", "nope", *args]) == 2
    capsys.readouterr()
    assert main(["prefs", "export", *args]) == 0
    exported = capsys.readouterr().out
    dump = tmp_path / "prefs.json"
    dump.write_text(exported)
    assert len(json.loads(exported)["preferences"]) == 2
    prt.redis.delete(PREFERENCES, preference_key(ALICE), preference_key("carla@example.com"))
    with TestClient(create_app(prt)) as client:
        assert _prefs(client)["optOuts"] == []
    assert main(["prefs", "import", str(dump), *args]) == 0
    with TestClient(create_app(prt)) as client:
        assert {p: _prefs(client, p) for p in (ALICE, "carla@example.com")} == before
    assert main(["prefs", "on", ALICE, "notification:output-port-*", *args]) == 0
    capsys.readouterr()
    assert main(["prefs", "show", ALICE, "--format", "json", *args]) == 0
    assert json.loads(capsys.readouterr().out)["optOuts"] == []
    assert main(["prefs", "link", ALICE, *args]) == 0
    assert capsys.readouterr().out.startswith(f"{PUBLIC}/preferences/")


def test_preview_says_what_a_preference_would_do(
    prt: Runtime, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "preview-config.json"
    config.write_text(json.dumps(prt.config.model_dump(mode="json", by_alias=True, exclude={"base_dir"})))
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps(sample_notification()))
    assert main(["prefs", "set", ALICE, "--off", KIND, "--config", str(config)]) == 0
    capsys.readouterr()
    assert main(["preview", str(payload), "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert f"skipped: opted out of {KIND} on every channel (the person's preferences)" in out


def test_a_chat_message_to_one_person_links_their_page_and_a_shared_channel_does_not(
    make_runtime: Callable[..., Runtime], tmp_path: Path, sink: HttpSink
) -> None:
    channels = {
        "owners-hook": {"url": sink.url("/owners"), "format": "md"},
        "managers-hook": {"url": sink.url("/managers")},
        "requester-email": {"url": sink.url("/dm/{email}"), "per_recipient": True, "format": "md"},
        "audit-hook": {"url": sink.url("/audit")},
    }
    rt = make_runtime(**_settings(tmp_path), channels=channels)
    with TestClient(create_app(rt)) as client:
        _send(rt, client)
    [dm] = sink.at("/dm/alice.rossi@example.com")
    assert re.search(rf"\[Manage your notifications\]\({PUBLIC}/preferences/[A-Za-z0-9_.-]+\)", dm.json()["message"])
    assert "List-Unsubscribe" not in dm.headers
    [owners] = sink.at("/owners")
    assert "Manage your notifications" not in owners.json()["message"]  # a channel is nobody's preference


def test_a_crash_on_a_people_page_logs_no_token() -> None:
    from relay.core.redaction import hide_path_keys as shown_path

    assert shown_path("/unsubscribe/abc.def") == "/unsubscribe/****"
    assert shown_path("/preferences/abc.def") == "/preferences/****"
    assert shown_path("/api/v1/events/x") == "/api/v1/events/x"


def test_one_click_as_multipart_and_bodies_over_the_limit(prt: Runtime, smtp: SmtpSink) -> None:
    with TestClient(create_app(prt)) as client:
        _send(prt, client)
        unsubscribe = _path(str(smtp.mails[0].message["List-Unsubscribe"])[1:-1])
        too_big = client.post(unsubscribe, data={"List-Unsubscribe": "One-Click", "pad": "x" * 20_000})
        assert too_big.status_code == 413
        neither = client.post(unsubscribe, data={"something": "else"})
        assert neither.status_code == 400
        assert client.post(unsubscribe, json={"List-Unsubscribe": "One-Click"}).status_code == 415
        odd = client.post(unsubscribe, data={"undo": "1", "csrf": "é" * 64})  # not ASCII: refused, no crash
        assert odd.status_code == 403
        assert _prefs(client)["optOuts"] == []
        # Some mail providers post RFC 8058's body as multipart/form-data.
        done = client.post(unsubscribe, files={"List-Unsubscribe": (None, "One-Click")})
        assert done.status_code == 200
        assert _prefs(client)["optOuts"] == [{"kind": KIND, "channel": "requester-email"}]


def test_a_digest_to_one_person_links_their_page(
    make_runtime: Callable[..., Runtime], tmp_path: Path, smtp: SmtpSink
) -> None:
    routes = [
        {
            "name": "requester-digest",
            "recipient_types": ["recipient-type:access-control-requester"],
            "channels": ["requester-email"],
            "digest": "15m",
        }
    ]
    rt = make_runtime(**_settings(tmp_path), routes=routes)
    with TestClient(create_app(rt)) as client:
        _send(rt, client)
        _send(rt, client)
    assert smtp.mails == []
    run_scheduled(rt)
    run_worker(rt)
    [mail] = smtp.mails
    assert mail.subject == "2 notifications"
    assert "Manage your notifications" in (mail.part("text/html") or "")
    assert re.search(rf"Manage your notifications: {PUBLIC}/preferences/\S+", mail.part("text/plain") or "")
    assert mail.message["List-Unsubscribe"] is None  # items of several kinds: the page, not one click


def test_a_fallback_to_a_persons_channel_obeys_their_opt_out(
    make_runtime: Callable[..., Runtime], tmp_path: Path, sink: HttpSink, smtp: SmtpSink
) -> None:
    """Alice's direct message fails for good; its fallback, an e-mail to her, is a delivery to her like any
    other: opted out of the kind by e-mail, it is skipped with the reason, never sent."""
    rt = make_runtime(
        **_settings(tmp_path),
        channels={
            "requester-dm": {"url": sink.url("/dm/{email}"), "per_recipient": True},
            "requester-email": {"url": smtp.url(), "per_recipient": True},
        },
        routes=[
            {
                "recipient_types": ["recipient-type:access-control-requester"],
                "channels": ["requester-dm"],
                "fallback": ["requester-email"],
            }
        ],
        default={"channels": []},
    )
    with TestClient(create_app(rt)) as client:
        body = {"optOuts": [{"kind": KIND, "channel": "requester-email"}], "activeHours": None}
        put = admin(client, f"/api/v1/people/{quote(ALICE, safe='')}/preferences", "PUT", json=body)
        assert put.status_code == 200
        payload = sample_notification()
        sink.script["/dm/alice.rossi@example.com"] = [404]  # her direct message fails for good
        assert post(client, payload).status_code == 202
        run_worker(rt)
        records = [r for r in rt.store.deliveries(rt.store.event_delivery_ids(payload["metadata"]["eventId"])) if r]
    fallbacks = [r for r in records if r.fallbackFor]
    assert fallbacks, [(r.channel, r.state, r.lastError, r.address) for r in records]
    assert all(r.state == "skipped" for r in fallbacks)
    assert all(r.lastError and r.lastError.startswith(f"opted out of {KIND} on requester-email") for r in fallbacks)
    assert smtp.mails == []
