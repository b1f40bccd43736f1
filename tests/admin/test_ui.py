"""The admin page at /ui over HTTP: login and sessions, CSRF, replay, what it shows and never shows."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis import Redis
from starlette.testclient import TestClient

from relay.admin.ui_session import COOKIE, SESSION_SECONDS, csrf_token, new_session, session_valid
from relay.admin.ui_view import anchor
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime, build
from tests.admin.forms import CROSS_SITE, csrf_of
from tests.conftest import ADMIN_TOKEN, WEBHOOK_TOKEN, accept, base_config, post, run_worker, sample_notification
from tests.servers import HttpSink, SmtpSink, free_port


def login(client: TestClient, token: str = ADMIN_TOKEN) -> Any:
    return client.post("/ui/login", data={"token": token}, follow_redirects=False)


def state_of(rt: Runtime, delivery_id: str) -> str:
    record = rt.store.delivery(delivery_id)
    assert record is not None
    return record.state


def failed_ids(rt: Runtime, event_id: str) -> list[str]:
    records = rt.store.deliveries(rt.store.event_delivery_ids(event_id))
    return [r.id for r in records if r is not None and r.state == "failed"]


@pytest.fixture
def failing(rt: Runtime, client: TestClient, sink: HttpSink) -> tuple[str, str]:
    """A notification whose owners' delivery failed for good (404); its eventId and that delivery's id."""
    sink.script["/owners"] = [404]
    payload = sample_notification()
    assert post(client, payload).status_code == 202
    run_worker(rt)
    event_id = payload["metadata"]["eventId"]
    [delivery_id] = failed_ids(rt, event_id)
    return event_id, delivery_id


@pytest.fixture
def logged_in(client: TestClient) -> TestClient:
    assert login(client).status_code == 303
    return client


@pytest.fixture
def open_client(make_runtime: Callable[..., Runtime]) -> Iterator[tuple[Runtime, TestClient]]:
    rt = make_runtime(server={"auth": {"tokens": [WEBHOOK_TOKEN]}, "admin_tokens": []})
    with TestClient(create_app(rt)) as client:
        yield rt, client


# -- authentication --------------------------------------------------------------------------------


def test_page_sends_a_browser_without_session_to_the_login_form(client: TestClient) -> None:
    answer = client.get("/ui", follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/login"
    form = client.get("/ui/login")
    assert form.status_code == 200 and 'type="password"' in form.text and 'name="token"' in form.text


def test_a_wrong_token_is_refused_and_sets_no_cookie(client: TestClient) -> None:
    for token in ("", "wrong", WEBHOOK_TOKEN, ADMIN_TOKEN + "x"):
        answer = login(client, token)
        assert answer.status_code == 401
        assert "not one of this relay" in answer.text and "admin tokens" in answer.text
        assert "set-cookie" not in answer.headers
    assert client.get("/ui", follow_redirects=False).status_code == 303


def test_login_sets_a_strict_http_only_cookie_that_is_not_the_token(client: TestClient) -> None:
    answer = login(client)
    assert answer.status_code == 303 and answer.headers["location"] == "/ui"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    assert f"Max-Age={SESSION_SECONDS}" in cookie
    assert "Secure" not in cookie  # plain HTTP here; see the next test
    assert ADMIN_TOKEN not in cookie
    assert client.get("/ui", follow_redirects=False).status_code == 200
    assert client.get("/ui/login", follow_redirects=False).headers["location"] == "/ui"


def test_cookie_is_secure_behind_https(client: TestClient) -> None:
    answer = client.post(
        "/ui/login", data={"token": ADMIN_TOKEN}, headers={"X-Forwarded-Proto": "https"}, follow_redirects=False
    )
    assert "Secure" in answer.headers["set-cookie"]


def test_sessions_are_signed_expire_and_end_with_their_token() -> None:
    tokens = ["first-admin-token", "second-admin-token"]
    now = 1_800_000_000.0
    value = new_session(tokens[1], now)
    assert session_valid(tokens, value, now)
    assert session_valid(["second-admin-token"], value, now + 60)  # any replica with the token accepts it
    assert not session_valid(["first-admin-token"], value, now)  # the token was removed: the session ends
    assert not session_valid([], value, now)
    expiry, nonce, signature = value.split(".")
    assert not session_valid(tokens, f"{int(expiry) + 60}.{nonce}.{signature}", now)  # longer life: not signed
    assert not session_valid(tokens, f"{expiry}.{nonce}x.{signature}", now)
    assert not session_valid(tokens, f"{expiry}.{nonce}.open", now)
    assert session_valid(tokens, value, now + SESSION_SECONDS)
    assert not session_valid(tokens, value, now + SESSION_SECONDS + 1)
    # A cookie that claims to last longer than a session from now was not made by this relay's clock.
    assert not session_valid(tokens, new_session(tokens[1], now + SESSION_SECONDS), now - 61)
    for junk in (None, "", "a.b", "x.y.z", "1.2.3.4", "..."):
        assert not session_valid(tokens, junk, now)
    assert csrf_token(value) != csrf_token(new_session(tokens[1], now))


def test_a_forged_cookie_is_not_a_session(client: TestClient, rt: Runtime) -> None:
    client.cookies.set(COOKIE, new_session("some-other-token", rt.clock()), path="/ui")
    assert client.get("/ui", follow_redirects=False).status_code == 303


def test_the_admin_api_bearer_header_works_for_scripts(client: TestClient, failing: tuple[str, str]) -> None:
    event_id, delivery_id = failing
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    page = client.get("/ui", headers=headers, follow_redirects=False)
    assert page.status_code == 200 and event_id in page.text
    answer = client.post("/ui/replay", data={"id": delivery_id}, headers=headers, follow_redirects=False)
    assert answer.status_code == 303 and "replayed=1" in answer.headers["location"]
    webhook_token = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}
    assert client.get("/ui", headers=webhook_token, follow_redirects=False).status_code == 303


def test_logout_needs_the_csrf_token_and_ends_the_session(logged_in: TestClient) -> None:
    csrf = csrf_of(logged_in.get("/ui").text)
    assert logged_in.post("/ui/logout", data={}, follow_redirects=False).status_code == 403
    assert logged_in.get("/ui", follow_redirects=False).status_code == 200
    answer = logged_in.post("/ui/logout", data={"csrf": csrf}, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/login"
    assert f'{COOKIE}=""' in answer.headers["set-cookie"] or "Max-Age=0" in answer.headers["set-cookie"]
    assert logged_in.get("/ui", follow_redirects=False).status_code == 303


# -- replay and CSRF -------------------------------------------------------------------------------


def test_replay_of_one_delivery_requeues_it_and_a_worker_delivers_it(
    rt: Runtime, logged_in: TestClient, failing: tuple[str, str], sink: HttpSink
) -> None:
    event_id, delivery_id = failing
    page = logged_in.get("/ui")
    assert f'name="id" value="{delivery_id}"' in page.text
    answer = logged_in.post("/ui/replay", data={"csrf": csrf_of(page.text), "id": delivery_id}, follow_redirects=False)
    assert answer.status_code == 303
    # Back to the page with its notice at the top and in view (#notice), the notice linking to the notification.
    assert answer.headers["location"] == f"/ui?replayed=1&of={event_id}#notice"
    assert state_of(rt, delivery_id) == "queued"
    notice = logged_in.get(answer.headers["location"]).text.split('id="notice"', 1)[1].split("</div>", 1)[0]
    assert "Requeued 1 failed delivery of" in notice and f'href="/ui#{anchor(event_id)}"' in notice

    run_worker(rt)
    assert state_of(rt, delivery_id) == "delivered"
    assert len(sink.at("/owners")) == 1
    page = logged_in.get("/ui")
    assert "No failed delivery" in page.text and 'data-state="delivered"' in page.text

    # Replaying a delivered one (a stale page, a double click) sends nothing again.
    again = logged_in.post("/ui/replay", data={"csrf": csrf_of(page.text), "id": delivery_id}, follow_redirects=False)
    assert "replayed=0" in again.headers["location"]
    assert "Nothing to replay" in logged_in.get(again.headers["location"]).text
    run_worker(rt)
    assert len(sink.at("/owners")) == 1


def test_replay_of_an_event_requeues_all_its_failed_deliveries_only(
    rt: Runtime, client: TestClient, logged_in: TestClient, sink: HttpSink
) -> None:
    sink.script["/owners"] = [404]
    sink.script["/managers"] = [404]
    payload = sample_notification()
    event_id = payload["metadata"]["eventId"]
    assert post(client, payload).status_code == 202
    run_worker(rt)
    failed = failed_ids(rt, event_id)
    assert len(failed) == 2
    page = logged_in.get(f"/ui?event={event_id}")
    answer = logged_in.post(
        "/ui/replay", data={"csrf": csrf_of(page.text), "eventId": event_id, "view": event_id}, follow_redirects=False
    )
    assert answer.headers["location"] == f"/ui?replayed=2&of={event_id}&event={event_id}#notice"
    assert {state_of(rt, d) for d in failed} == {"queued"}
    run_worker(rt)
    assert {state_of(rt, d) for d in failed} == {"delivered"}
    assert len(sink.at("/owners")) == len(sink.at("/managers")) == 1


@CROSS_SITE
def test_replay_refuses_cross_site_requests(
    rt: Runtime,
    logged_in: TestClient,
    failing: tuple[str, str],
    form: dict[str, str],
    headers: dict[str, str],
) -> None:
    _, delivery_id = failing
    csrf = csrf_of(logged_in.get("/ui").text)
    data = {k: csrf if v == "CSRF" else v for k, v in form.items()} | {"id": delivery_id}
    answer = logged_in.post("/ui/replay", data=data, headers=headers, follow_redirects=False)
    assert answer.status_code == 403
    assert state_of(rt, delivery_id) == "failed"


def test_replay_from_this_host_with_origin_is_accepted(
    rt: Runtime, logged_in: TestClient, failing: tuple[str, str]
) -> None:
    _, delivery_id = failing
    csrf = csrf_of(logged_in.get("/ui").text)
    answer = logged_in.post(
        "/ui/replay",
        data={"csrf": csrf, "id": delivery_id},
        headers={"Origin": "http://testserver"},
        follow_redirects=False,
    )
    assert answer.status_code == 303 and state_of(rt, delivery_id) == "queued"


def test_csrf_token_of_another_session_is_refused(
    rt: Runtime, client: TestClient, failing: tuple[str, str], make_runtime: Callable[..., Runtime]
) -> None:
    _, delivery_id = failing
    login(client)
    theirs = csrf_of(client.get("/ui").text)
    client.cookies.clear()
    login(client)
    answer = client.post("/ui/replay", data={"csrf": theirs, "id": delivery_id}, follow_redirects=False)
    assert answer.status_code == 403 and state_of(rt, delivery_id) == "failed"


def test_replay_without_a_session_is_refused(rt: Runtime, client: TestClient, failing: tuple[str, str]) -> None:
    _, delivery_id = failing
    answer = client.post("/ui/replay", data={"id": delivery_id}, follow_redirects=False)
    assert answer.status_code == 401 and "log in again" in answer.text
    assert state_of(rt, delivery_id) == "failed"


@pytest.mark.parametrize(
    "data",
    [{}, {"id": "d1", "eventId": "e1"}, {"id": " "}],
)
def test_replay_needs_exactly_one_target(logged_in: TestClient, data: dict[str, str]) -> None:
    csrf = csrf_of(logged_in.get("/ui").text)
    answer = logged_in.post("/ui/replay", data={"csrf": csrf, **data}, follow_redirects=False)
    assert answer.status_code == 400


def test_replay_must_be_a_small_form(logged_in: TestClient) -> None:
    csrf = csrf_of(logged_in.get("/ui").text)
    as_json = logged_in.post("/ui/replay", json={"csrf": csrf, "id": "x"}, follow_redirects=False)
    assert as_json.status_code == 415 and as_json.json()["errors"][0].startswith("the body is not a form")
    huge = logged_in.post("/ui/replay", data={"csrf": csrf, "id": "x" * 20_000}, follow_redirects=False)
    assert huge.status_code == 413


# -- open mode (no admin tokens): like the admin API, but still no cross-site replay ----------------------


def test_open_mode_needs_no_login_but_replay_still_needs_the_csrf_token(
    open_client: tuple[Runtime, TestClient], sink: HttpSink
) -> None:
    rt, client = open_client
    sink.script["/owners"] = [404]
    payload = sample_notification()
    assert post(client, payload).status_code == 202
    run_worker(rt)
    [delivery_id] = failed_ids(rt, payload["metadata"]["eventId"])

    page = client.get("/ui", follow_redirects=False)
    assert page.status_code == 200 and "admin_tokens</code> is empty" in page.text
    assert "HttpOnly" in page.headers["set-cookie"] and "Log out" not in page.text
    assert client.get("/ui/login", follow_redirects=False).headers["location"] == "/ui"

    fresh = TestClient(create_app(rt))
    assert fresh.post("/ui/replay", data={"id": delivery_id}, follow_redirects=False).status_code == 403
    assert client.post("/ui/replay", data={"id": delivery_id}, follow_redirects=False).status_code == 403
    evil = {"Origin": "http://evil.example"}
    data = {"csrf": csrf_of(page.text), "id": delivery_id}
    assert client.post("/ui/replay", data=data, headers=evil, follow_redirects=False).status_code == 403
    assert state_of(rt, delivery_id) == "failed"
    assert client.post("/ui/replay", data=data, follow_redirects=False).status_code == 303
    assert state_of(rt, delivery_id) == "queued"


# -- what the page shows --------------------------------------------------------------------------


def test_page_shows_events_deliveries_failures_and_counters(
    rt: Runtime, client: TestClient, logged_in: TestClient, failing: tuple[str, str]
) -> None:
    event_id, delivery_id = failing
    post(client, sample_notification(metadata={"eventId": event_id}))  # a duplicate
    html = logged_in.get("/ui").text
    counters = dict(re.findall(r'id="c-([a-z]+)">(\d+)<', html))
    assert counters == {
        "received": "1",
        "duplicates": "1",
        "delivered": "2",
        "failed": "1",
        "queue": "0",
        "workers": "0",
    }
    rt.store.heartbeat("worker-1")
    assert 'id="c-workers">1<' in logged_in.get("/ui").text

    failed = html.split('id="failed"', 1)[1].split('id="events"', 1)[0]
    assert delivery_id in failed and "owners-hook" in failed and "error=404" in failed
    assert "Replay event" in failed
    events = html.split('id="events"', 1)[1]
    assert event_id in events and "notification:access-control-request-failed" in events
    for channel in ("owners-hook", "managers-hook", "requester-email"):
        assert channel in events
    assert events.count('data-state="delivered"') == 2 and events.count('data-state="failed"') == 1
    assert "user:default/alice.rossi" in events  # the recipient's userRef
    assert "2 delivered" in events and "1 failed" in events


def test_page_never_shows_channel_urls_addresses_or_secrets(
    rt: Runtime, logged_in: TestClient, failing: tuple[str, str], sink: HttpSink, smtp: SmtpSink
) -> None:
    html = logged_in.get("/ui").text + logged_in.get(f"/ui?event={failing[0]}").text
    secrets = [ADMIN_TOKEN, WEBHOOK_TOKEN, *(c.url for c in rt.config.channels.values())]
    # An error names the service's host and port (docs/delivery.md), never the rest of its URL.
    secrets += [f":{sink.port}/", f":{smtp.port}?", "json://", "mailto://"]
    records = rt.store.deliveries(rt.store.event_delivery_ids(failing[0]))
    secrets += [r.address for r in records if r is not None and r.address]
    assert any(r is not None and r.address for r in records)
    for secret in secrets:
        assert secret not in html, secret


def test_payload_values_are_escaped(rt: Runtime, logged_in: TestClient) -> None:
    evil = "notification:<script>alert(1)</script>"
    accept(rt, '"><img src=x onerror=alert(1)>', evil, json.dumps({"kind": evil}))
    html = logged_in.get("/ui").text
    assert "<script>alert(1)" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_security_headers_and_a_nonce_for_the_inline_style(logged_in: TestClient) -> None:
    for answer in (logged_in.get("/ui"), TestClient(logged_in.app).get("/ui/login")):
        policy = answer.headers["content-security-policy"]
        nonce = re.search(r"style-src 'nonce-([^']+)'", policy)
        assert nonce and f'<style nonce="{nonce.group(1)}">' in answer.text
        assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy and "script-src" not in policy
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["cache-control"] == "no-store"
        assert answer.headers["content-type"].startswith("text/html")
        assert "<script" not in answer.text


def test_one_event_view_and_unknown_events(rt: Runtime, logged_in: TestClient, failing: tuple[str, str]) -> None:
    event_id, _ = failing
    accept(rt, "other-event", "notification:other", "{}")
    page = logged_in.get(f"/ui?event={event_id}").text
    assert event_id in page and "other-event" not in page.split('id="events"', 1)[1]
    assert 'name="view" value="' + event_id in page
    missing = logged_in.get("/ui?event=nope").text
    assert "No notification with eventId <code>nope</code>" in missing


def test_older_notifications_are_paged(rt: Runtime, logged_in: TestClient) -> None:
    for i in range(3):
        accept(rt, f"event-{i}", "notification:paged", "{}")
        rt.clock.advance(0.01)
    first = logged_in.get("/ui?limit=2").text
    assert "event-2" in first and "event-1" in first and "event-0" not in first
    older = re.search(r'href="(/ui\?before=[^"]+)"', first)
    assert older
    second = logged_in.get(older.group(1).replace("&amp;", "&")).text
    assert "event-0" in second and "event-1" not in second and "Older notifications" not in second
    for bad in ("limit=x", "limit=" + "9" * 5000, "before=nan", "before=inf", "before=x"):
        assert logged_in.get(f"/ui?{bad}").status_code == 400, bad


def test_auto_refresh_is_bounded(logged_in: TestClient) -> None:
    assert '<meta http-equiv="refresh" content="10">' in logged_in.get("/ui?refresh=10").text
    assert "http-equiv" not in logged_in.get("/ui?refresh=1").text
    assert "http-equiv" not in logged_in.get("/ui").text
    assert logged_in.get("/ui?refresh=" + "9" * 5000).status_code == 200


def test_the_replayed_notice_shows_only_a_count(logged_in: TestClient) -> None:
    assert "Requeued 3 failed deliveries" in logged_in.get("/ui?replayed=3").text
    spoof = logged_in.get("/ui?replayed=everything%20was%20lost").text
    assert "Requeued" not in spoof and "everything was lost" not in spoof


def test_redis_unreachable_is_a_503_page(sink: HttpSink, smtp: SmtpSink, tmp_path: Path) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    rt = build(
        base_config(sink, smtp, tmp_path, dead), Redis.from_url(dead, socket_connect_timeout=0.5, socket_timeout=0.5)
    )
    with TestClient(create_app(rt)) as client:
        assert login(client).status_code == 303
        answer = client.get("/ui")
        assert answer.status_code == 503 and "Redis is unavailable" in answer.text
        assert answer.headers["retry-after"] == "5"
