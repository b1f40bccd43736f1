"""The admin page's held deliveries and digests: badges, the held section with its Release (a confirmation
page, then a POST guarded as replay is, through the admin API's own release), and a digest's items linked to
their digest in a column of their own. Real Redis, RQ, SMTP and HTTP sinks; the catalog is the fake platform."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from starlette.testclient import TestClient

from relay.admin.ui_view import anchor
from relay.core.model import Delivery
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.storage.store import iso
from tests.admin.forms import CROSS_SITE, csrf_of
from tests.conftest import ADMIN_TOKEN, post, run_scheduled, run_worker, sample_notification
from tests.platform_fake import ACCESS_TOKEN, FakePlatform
from tests.servers import SmtpSink

# Closed until next New Year's Day, whenever the test runs: the requester's e-mail is held until then.
NEXT_YEAR = {"name": "next-year", "time_intervals": [{"years": [datetime.now(UTC).year + 1]}]}
OWNERS = "recipient-type:system-owner"


def login(client: TestClient) -> TestClient:
    assert client.post("/ui/login", data={"token": ADMIN_TOKEN}, follow_redirects=False).status_code == 303
    return client


def row(html: str, delivery_id: str) -> str:
    """The first table row of the delivery in `html`."""
    found = re.search(rf'<tr class="delivery"[^>]*data-id="{delivery_id}".*?</tr>', html, re.S)
    assert found, f"no row for {delivery_id}"
    return found.group(0)


def section(html: str, name: str) -> str:
    return html.split(f'<section id="{name}"', 1)[1].split("</section>", 1)[0]


def records(rt: Runtime, event_id: str) -> list[Delivery]:
    return [r for r in rt.store.deliveries(rt.store.event_delivery_ids(event_id)) if r is not None]


def state_of(rt: Runtime, delivery_id: str) -> str:
    record = rt.store.delivery(delivery_id)
    assert record is not None
    return record.state


def held_settings() -> dict[str, Any]:
    """Settings under which the requester's e-mail is held until next year; the others are sent."""
    routes: list[dict[str, Any]] = [
        {"recipient_types": [OWNERS], "channels": ["owners-hook"]},
        {"recipient_types": ["recipient-type:project-data-access-manager"], "channels": ["managers-hook"]},
        {
            "name": "requester",
            "recipient_types": ["recipient-type:access-control-requester"],
            "channels": ["requester-email"],
            "active_time_intervals": ["next-year"],
        },
    ]
    return {"time_intervals": [NEXT_YEAR], "routes": routes}


@pytest.fixture
def held_rt(make_runtime: Callable[..., Runtime]) -> Runtime:
    return make_runtime(**held_settings())


@pytest.fixture
def held_client(held_rt: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(held_rt)) as client:
        yield login(client)


@pytest.fixture
def held(held_rt: Runtime, held_client: TestClient) -> tuple[str, Delivery]:
    """A notification whose requester's e-mail is held (the other two delivered): its eventId and that record."""
    payload = sample_notification()
    assert post(held_client, payload).status_code == 202
    run_worker(held_rt)
    event_id = payload["metadata"]["eventId"]
    [email] = [r for r in records(held_rt, event_id) if r.state == "held"]
    assert email.channel == "requester-email" and email.notBefore is not None
    return event_id, email


def test_held_deliveries_have_a_badge_of_their_own(held_client: TestClient, held: tuple[str, Delivery]) -> None:
    html = held_client.get("/ui").text
    assert '<span class="badge state-held">held</span>' in section(html, "events")
    assert re.search(r"\.state-held \{ color: var\(--held\); background: var\(--held-bg\); \}", html)
    assert "1 held" in section(html, "events")  # the notification's count of its states


def test_an_expanded_group_has_a_badge_of_its_own(make_runtime: Callable[..., Runtime]) -> None:
    platform = FakePlatform(
        users={"carla.neri": "carla.neri@example.com"}, groups={"data-managers": ["user:default/carla.neri"]}
    ).start()
    try:
        rt = make_runtime(
            platform={"url": platform.url, "access_token": ACCESS_TOKEN, "jwt_duration": "10m", "timeout": "1s"},
            routes=[{"channels": ["requester-email"]}],
            default={"channels": []},
        )
        message = {
            "recipientType": OWNERS,
            "recipients": [{"userRef": "group:default/data-managers", "spec.email": None}],
            "title": "t",
            "message": "m",
        }
        payload = sample_notification(messages=[message])
        with TestClient(create_app(rt)) as client:
            post(client, payload)
            run_worker(rt)
            html = login(client).get("/ui").text
    finally:
        platform.stop()
    [group] = [r for r in records(rt, payload["metadata"]["eventId"]) if r.state == "expanded"]
    assert '<span class="badge state-expanded">expanded</span>' in row(html, group.id)
    assert re.search(r"\.state-expanded \{ color: var\(--group\); background: var\(--group-bg\); \}", html)


def test_the_held_section_says_when_each_goes_out_with_a_release_button(
    held_rt: Runtime, held_client: TestClient, held: tuple[str, Delivery]
) -> None:
    event_id, email = held
    html = held_client.get("/ui").text
    assert email.notBefore is not None
    part = section(html, "held")
    assert "1 held, soonest first" in part
    line = row(part, email.id)
    assert f'datetime="{iso(email.notBefore)}"' in line and "quiet hours" in line and event_id in line
    assert 'action="/ui/release"' in line and f'name="id" value="{email.id}"' in line
    assert "Release…" in line
    # One time format on the page, the API's and the logs' (issue 48): no second one, with a space and "UTC".
    assert f">{iso(email.notBefore)}</time>" in line
    assert not re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)? UTC", html)
    # In the notification's table the held row says until when; the delivered ones say nothing of it.
    events = section(html, "events")
    assert "until" in row(events, email.id) and "Release…" in row(events, email.id)
    for other in records(held_rt, event_id):
        if other.state == "delivered":
            assert "until" not in row(events, other.id) and "not-before" not in row(events, other.id)


def test_release_asks_first_then_sends_it_now_through_the_api_s_release(
    held_rt: Runtime, held_client: TestClient, held: tuple[str, Delivery], smtp: SmtpSink
) -> None:
    event_id, email = held
    confirm = held_client.get(f"/ui/release?id={email.id}")
    assert confirm.status_code == 200
    assert "Send held deliveries now?" in confirm.text and "1 delivery goes out now" in confirm.text
    assert email.id in confirm.text and "Release now" in confirm.text and 'href="/ui"' in confirm.text
    assert state_of(held_rt, email.id) == "held"  # asking sends nothing

    form = {"csrf": csrf_of(confirm.text), "id": email.id}
    answer = held_client.post("/ui/release", data=form, follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/ui?released=1&of={event_id}#notice"
    assert state_of(held_rt, email.id) == "queued"
    page = held_client.get(answer.headers["location"]).text
    assert (
        f'Released 1 held delivery of <a class="mono" href="/ui#{anchor(event_id)}">{event_id}</a>: it goes out now.'
        in page
    )
    assert "No held delivery" in section(page, "held")

    run_worker(held_rt)
    assert state_of(held_rt, email.id) == "delivered"
    assert [m.envelope_to for m in smtp.mails] == [["alice.rossi@example.com"]]
    # The record keeps its notBefore (it was held); the page shows it no longer.
    sent = held_rt.store.delivery(email.id)
    assert sent is not None and sent.notBefore is not None
    page = held_client.get(f"/ui?event={event_id}").text
    assert iso(sent.notBefore) not in page and "until" not in row(section(page, "events"), email.id)

    # Again (a stale page): nothing is held there, nothing is sent.
    again = held_client.post("/ui/release", data=form, follow_redirects=False)
    assert "released=0" in again.headers["location"]
    assert "Nothing to release" in held_client.get(again.headers["location"]).text
    assert "Nothing to release" in held_client.get(f"/ui/release?id={email.id}").text
    run_worker(held_rt)
    assert len(smtp.mails) == 1


def test_release_of_a_notification_from_its_own_view(
    held_rt: Runtime, held_client: TestClient, held: tuple[str, Delivery]
) -> None:
    event_id, email = held
    view = held_client.get(f"/ui?event={event_id}").text
    assert f'name="eventId" value="{event_id}"' in view and "Release held…" in view
    confirm = held_client.get(f"/ui/release?eventId={event_id}&view={event_id}").text
    assert f'name="eventId" value="{event_id}"' in confirm and f'name="view" value="{event_id}"' in confirm
    data = {"csrf": csrf_of(confirm), "eventId": event_id, "view": event_id}
    answer = held_client.post("/ui/release", data=data, follow_redirects=False)
    assert answer.headers["location"] == f"/ui?released=1&of={event_id}&event={event_id}#notice"
    assert state_of(held_rt, email.id) == "queued"


@CROSS_SITE
def test_release_refuses_cross_site_requests(
    held_rt: Runtime,
    held_client: TestClient,
    held: tuple[str, Delivery],
    form: dict[str, str],
    headers: dict[str, str],
) -> None:
    _, email = held
    csrf = csrf_of(held_client.get(f"/ui/release?id={email.id}").text)
    data = {k: csrf if v == "CSRF" else v for k, v in form.items()} | {"id": email.id}
    answer = held_client.post("/ui/release", data=data, headers=headers, follow_redirects=False)
    assert answer.status_code == 403
    assert state_of(held_rt, email.id) == "held"


def test_release_needs_an_admin(held_rt: Runtime, held: tuple[str, Delivery]) -> None:
    _, email = held
    with TestClient(create_app(held_rt)) as stranger:
        assert stranger.get(f"/ui/release?id={email.id}", follow_redirects=False).headers["location"] == "/ui/login"
        answer = stranger.post("/ui/release", data={"id": email.id}, follow_redirects=False)
        assert answer.status_code == 401 and "log in again" in answer.text
    assert state_of(held_rt, email.id) == "held"


@pytest.mark.parametrize("query", ["", "id=d1&eventId=e1", "id=%20"])
def test_release_needs_exactly_one_target(held_client: TestClient, query: str) -> None:
    assert held_client.get(f"/ui/release?{query}").status_code == 400
    csrf = csrf_of(held_client.get("/ui").text)
    data = dict(pair.split("=", 1) for pair in query.replace("%20", " ").split("&") if pair)
    answer = held_client.post("/ui/release", data={"csrf": csrf, **data}, follow_redirects=False)
    assert answer.status_code == 400


def test_a_digest_item_names_its_digest_in_a_column_of_its_own(
    make_runtime: Callable[..., Runtime],
) -> None:
    rt = make_runtime(
        routes=[{"name": "gathered", "recipient_types": [OWNERS], "channels": ["owners-hook"], "digest": "15m"}]
    )
    owner_message = sample_notification()["messages"][0]
    payloads = [sample_notification(messages=[owner_message]) for _ in range(2)]
    with TestClient(create_app(rt)) as client:
        for payload in payloads:
            assert post(client, payload).status_code == 202
            rt.clock.advance(0.001)  # received one after the other
        run_worker(rt)
        # The digest is named by the item gathered first (sender threads gather in the order they run): the
        # other notification's delivery is the item that names it.
        gathered = [r for p in payloads for r in records(rt, str(p["metadata"]["eventId"])) if r.digest]
        digest = rt.store.delivery(gathered[0].digest or "")
        assert digest is not None and len(digest.items) == 2
        [item] = [r for r in gathered if r.eventId != digest.eventId]
        first, second = digest.eventId, item.eventId

        held_page = login(client).get("/ui").text
        assert "digest of 2 gathering" in row(section(held_page, "held"), digest.id)

        run_scheduled(rt)  # the window ends now
        run_worker(rt)
        assert state_of(rt, item.id) == "delivered"
        html = client.get(f"/ui?event={second}").text
        first_html = client.get(f"/ui?event={first}").text

    events = section(html, "events")
    assert "<th>Digest</th>" in events
    line = row(events, item.id)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", line, re.S)
    [digest_cell] = [c for c in cells if "sent in digest" in c]
    link = re.search(r'<a class="mono" href="([^"]+)">([^<]+)</a>', digest_cell)
    assert link and link.group(2) == digest.id
    href = link.group(1)
    assert href.startswith(f"/ui?event={first}#dl-")
    [error_cell] = re.findall(r'<td class="error"[^>]*>(.*?)</td>', line, re.S)
    assert "digest" not in error_cell
    # The link lands on the digest's own row, marked as a digest of 2.
    digest_row = row(section(first_html, "events"), digest.id)
    assert f'id="{href.split("#", 1)[1]}"' in digest_row and "digest</span> of 2" in digest_row
    assert "until" not in line and "until" not in digest_row  # delivered: no stale notBefore


def test_the_released_notice_shows_only_a_count(held_client: TestClient) -> None:
    assert "Released 3 held deliveries: they go out now." in held_client.get("/ui?released=3").text
    spoof = held_client.get("/ui?released=everything%20was%20sent").text
    assert "Released" not in spoof and "everything was sent" not in spoof


@pytest.mark.parametrize(
    ("last_error", "shown"),
    [
        (None, "quiet hours"),
        ("held by the person's active hours", "the person's active hours"),
        ("channel down since 2026-11-27T21:49:42.251Z", "channel down since 2026-11-27T21:49:42.251Z"),
        ("silenced by 5b0e (ana): db move", "silenced by 5b0e (ana): db move"),
    ],
)
def test_held_by_says_the_gate_that_holds_it_once(last_error: str | None, shown: str) -> None:
    from relay.admin.ui_view import DeliveryRow
    from relay.core.model import State

    held = Delivery("d1", "e1", "notification:x", 0, "owners-hook", "auto", 3, 0.0, 0.0, state=State.HELD)
    held.lastError = last_error
    assert DeliveryRow(held).held_by == shown


def test_the_held_list_folds_past_its_first_five(held_rt: Runtime, held_client: TestClient) -> None:
    """Issue 48: on a phone the silences came five screens down, after every held row: past five, the rest fold."""
    for _ in range(7):
        assert post(held_client, sample_notification()).status_code == 202
    run_worker(held_rt)
    part = section(held_client.get("/ui").text, "held")
    shown, folded = part.split('<details class="more-held">')
    assert shown.count('<tr class="delivery"') == 5 and folded.count('<tr class="delivery"') == 2
    assert "<summary>Show 2 more held</summary>" in folded
