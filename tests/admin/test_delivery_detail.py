"""GET /api/v1/deliveries/{deliveryId} and /ui/deliveries/{deliveryId}: one delivery with the log of its tries
(what each came to, the service's status and words, how long it took) and the message it sent."""

from __future__ import annotations

from starlette.testclient import TestClient

from relay.admin.detail import sent_message
from relay.core.model import Delivery, Message, State
from relay.core.outcome import MAX_LOGGED, MAX_LOGGED_TEXT, Delivered, Transient, attempt_entry, logged
from relay.core.rendering import PLATFORM, Rendered
from relay.delivery.compose import note_sent
from relay.runtime.bootstrap import Runtime
from relay.storage.records import delivery_key
from tests.conftest import ADMIN_TOKEN, admin, post, run_scheduled, run_worker, sample_notification
from tests.servers import HttpSink


def owners_delivery(rt: Runtime, event_id: str) -> str:
    records = rt.store.deliveries(rt.store.event_delivery_ids(event_id))
    [found] = [r.id for r in records if r is not None and r.channel == "owners-hook"]
    return found


def test_a_delivery_shows_each_try_and_the_message_it_sent(rt: Runtime, client: TestClient, sink: HttpSink) -> None:
    sink.script["/owners"] = [503]
    payload = sample_notification()
    assert post(client, payload).status_code == 202
    run_worker(rt)
    run_scheduled(rt)
    run_worker(rt)
    delivery_id = owners_delivery(rt, payload["metadata"]["eventId"])
    answer = admin(client, f"/api/v1/deliveries/{delivery_id}")
    assert answer.status_code == 200
    found = answer.json()
    assert found["id"] == delivery_id and found["state"] == "delivered"
    assert found["eventId"] == payload["metadata"]["eventId"] and found["kind"] == payload["kind"]
    assert found["attempts"] == 2  # SPEC's count, an integer as in every listing
    first, second = found["attemptLog"]
    assert first["outcome"] == "transient" and first["status"] == 503
    assert first["said"] == "Service Unavailable: ok"
    assert first["error"].startswith(f"127.0.0.1:{sink.port} answered HTTP 503")
    assert first["at"] == found["attemptTimes"][0] and first["seconds"] >= 0
    assert second["outcome"] == "delivered" and second["error"] is None and second["status"] is None
    assert found["message"] == {"title": payload["messages"][0]["title"], "text": payload["messages"][0]["message"]}
    assert "Alice Rossi" in found["message"]["text"]
    assert "attemptLog" not in admin(client, "/api/v1/deliveries").json()[0]  # listings keep their shape
    # The platform's own words went out as given: read from the payload, not kept twice.
    assert found["template"] == PLATFORM
    assert not {b"sentTitle", b"sentText"} & set(rt.redis.hgetall(delivery_key(delivery_id)))


def test_an_unknown_delivery_is_404_in_the_error_body_and_it_needs_admin_credentials(client: TestClient) -> None:
    answer = admin(client, "/api/v1/deliveries/dnosuchdelivery")
    assert answer.status_code == 404
    body = answer.json()
    assert body["inputErrorField"] == "deliveryId" and body["moreInfo"]["solutions"]
    assert "dnosuchdelivery" in body["errors"][0]
    assert client.get("/api/v1/deliveries/dnosuchdelivery").status_code == 401


def test_a_delivery_never_tried_has_no_message_and_an_empty_log(rt: Runtime, client: TestClient) -> None:
    record = Delivery("dnevertried", "e-never", "k", 0, "owners-hook", "auto", 3, 1.0, 1.0, state=State.HELD)
    rt.store.create_deliveries("e-never", [record])
    found = admin(client, "/api/v1/deliveries/dnevertried").json()
    assert found["state"] == "held" and found["attempts"] == 0
    assert found["attemptLog"] == [] and found["message"] is None


def test_the_attempt_log_keeps_the_last_tries_and_bounds_their_texts() -> None:
    entries: list[dict[str, object]] = []
    for i in range(MAX_LOGGED + 5):
        entries = logged(entries, attempt_entry(Transient("x" * 5000, None, 451, "y" * 5000), float(i), 0.5))
    assert len(entries) == MAX_LOGGED and entries[0]["at"] == 5.0 and entries[-1]["at"] == MAX_LOGGED + 4.0
    assert len(str(entries[-1]["error"])) == MAX_LOGGED_TEXT and len(str(entries[-1]["said"])) == MAX_LOGGED_TEXT
    assert attempt_entry(Delivered(), 1.0, None)["outcome"] == "delivered"


def test_the_message_kept_has_no_link_token() -> None:
    record = Delivery("d1", "e1", "k", 0, "c", "auto", 3, 0.0, 0.0)
    token = "eyJwIjoiYWxpY2UifQ.c2lnbmF0dXJlLXNlY3JldA"
    links = {"preferences_url": f"https://relay.example.com/preferences/{token}"}
    html = f"<a href='https://relay.example.com/preferences/{token}'>x</a>"
    rendered = Rendered("Hi", html, "html", "t", None, f"link: https://relay.example.com/preferences/{token}")
    note_sent(record, "Hi", rendered, links)
    assert record.sentTitle == "Hi" and record.sentText is not None and token not in record.sentText


def test_only_what_differs_from_the_platforms_message_is_kept_and_the_rest_read_from_it() -> None:
    given = Message(title="Access request failed", message="The request failed.")
    record = Delivery("d1", "e1", "k", 0, "c", "auto", 3, 0.0, 0.0, attempts=1, templateUsed=PLATFORM)
    as_given = Rendered(given.title or "", given.message or "", "txt", PLATFORM, None)
    note_sent(record, "Access request failed", as_given, None, given)
    assert (record.sentTitle, record.sentText) == (None, None)
    assert sent_message(record, given) == {"title": "Access request failed", "text": "The request failed."}
    note_sent(record, "Access req…", as_given, None, given)  # the title cut for its channel: kept
    assert (record.sentTitle, record.sentText) == ("Access req…", None)
    assert sent_message(record, given) == {"title": "Access req…", "text": "The request failed."}
    own = Rendered("Access request failed", "The request failed.", "txt", "k/owners.txt.j2", None)
    note_sent(record, "Access request failed", own, None, given)  # a template's words: kept, even when equal
    assert (record.sentTitle, record.sentText) == ("Access request failed", "The request failed.")
    never = Delivery("d2", "e1", "k", 0, "c", "auto", 3, 0.0, 0.0, templateUsed=PLATFORM)
    assert sent_message(never, given) is None


# -- the admin page's view of one delivery ----------------------------------------------------------------


def test_the_delivery_page_shows_the_tries_and_the_message_and_the_overview_links_it(
    rt: Runtime, client: TestClient, sink: HttpSink
) -> None:
    sink.script["/owners"] = [503]
    payload = sample_notification()
    assert post(client, payload).status_code == 202
    run_worker(rt)
    delivery_id = owners_delivery(rt, payload["metadata"]["eventId"])
    assert client.post("/ui/login", data={"token": ADMIN_TOKEN}, follow_redirects=False).status_code == 303
    overview = client.get("/ui")
    assert f'href="/ui/deliveries/{delivery_id}"' in overview.text
    page = client.get(f"/ui/deliveries/{delivery_id}")
    assert page.status_code == 200
    html = page.text
    assert 'data-outcome="transient"' in html and "Service Unavailable: ok" in html
    assert f"127.0.0.1:{sink.port} answered HTTP 503" in html
    assert "Access request failed" in html and "Alice Rossi" in html
    assert sink.url("/owners") not in html  # the channel's URL never shows


def test_the_delivery_page_needs_a_session_and_says_404_for_an_unknown_id(client: TestClient) -> None:
    assert client.get("/ui/deliveries/dnosuch", follow_redirects=False).headers["location"] == "/ui/login"
    assert client.post("/ui/login", data={"token": ADMIN_TOKEN}, follow_redirects=False).status_code == 303
    missing = client.get("/ui/deliveries/dnosuch")
    assert missing.status_code == 404 and "No such delivery" in missing.text


def test_the_delivery_page_replays_a_failed_delivery_from_its_own_button(
    rt: Runtime, client: TestClient, sink: HttpSink
) -> None:
    """No dead end: a failed delivery's page has Replay (a held one's, Release), and the button does it."""
    import re

    sink.script["/owners"] = [404]  # permanent: failed at once
    payload = sample_notification()
    assert post(client, payload).status_code == 202
    run_worker(rt)
    delivery_id = owners_delivery(rt, payload["metadata"]["eventId"])
    assert client.post("/ui/login", data={"token": ADMIN_TOKEN}, follow_redirects=False).status_code == 303
    html = client.get(f"/ui/deliveries/{delivery_id}").text
    form = re.search(r'<form class="inline" method="post" action="/ui/replay">(.*?)</form>', html, re.S)
    assert form is not None and f'name="id" value="{delivery_id}"' in form.group(1) and "Release" not in html
    fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', form.group(1)))
    answer = client.post("/ui/replay", data=fields, follow_redirects=False)
    assert answer.status_code == 303
    run_worker(rt)
    assert len(sink.at("/owners")) == 1 and rt.store.delivery(delivery_id).state == State.DELIVERED
    assert 'action="/ui/replay"' not in client.get(f"/ui/deliveries/{delivery_id}").text  # delivered: no button
