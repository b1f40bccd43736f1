"""Names people know, end to end: the e-mail through the real SMTP sink names people (the payload's names,
the platform catalog's for the rest, cached in Redis; a readable reference when neither has one) and has a
button to the resource; the preference and unsubscribe pages say who they are for and name the channel by
its label; a slow or absent platform neither holds a page nor fails an e-mail. The catalog is the fake
platform (tests/platform_fake.py), the pages are served through Starlette's TestClient."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from starlette.testclient import TestClient

from relay.cli import main
from relay.people.pages import NAME_WAIT
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from tests.conftest import admin, post, run_worker, sample_notification
from tests.platform_fake import ACCESS_TOKEN, FakePlatform
from tests.servers import HttpSink, SmtpSink

UI = "https://ui.example.com/app"
BUTTON = f"{UI}/marketplace/systems/urn:dmb:dp:finance:invoices:1"
TEAM = "group:default/analytics-team"


@pytest.fixture
def platform() -> Iterator[FakePlatform]:
    fake = FakePlatform(
        users={"alice.rossi": "alice.rossi@example.com", "carla.neri": None},  # her address: her links, her page
        groups={"analytics-team": ["user:default/alice.rossi"]},
        display_names={"analytics-team": "Analytics Team", "carla.neri": "Carla Neri"},
    ).start()
    yield fake
    fake.stop()


@pytest.fixture
def names_rt(
    make_runtime: Callable[..., Runtime], platform: FakePlatform, sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> Runtime:
    return make_runtime(
        platform={"url": platform.url, "ui_url": UI, "access_token": ACCESS_TOKEN, "timeout": "1s"},
        templates={"dir": str(tmp_path / "templates"), "builtin": True},
        preferences={"public_url": "http://testserver", "secret": "s" * 40},
        channels={
            "owners-hook": {"url": sink.url("/owners")},
            "managers-hook": {"url": sink.url("/managers")},
            "requester-email": {"url": smtp.url(), "per_recipient": True, "label": "E-mail"},
            "audit-hook": {"url": sink.url("/audit")},
        },
    )


def _send(rt: Runtime, client: TestClient) -> str:
    payload = sample_notification()
    assert post(client, payload).status_code == 202
    run_worker(rt)
    return str(payload["metadata"]["eventId"])


def _page(client: TestClient, person: str) -> str:
    url = admin(client, f"/api/v1/people/{quote(person, safe='')}/link").json()["preferencesUrl"]
    answer = client.get(urlsplit(url).path)
    assert answer.status_code == 200
    return str(answer.text)


def test_the_email_names_people_and_has_a_button_to_the_resource(
    names_rt: Runtime, platform: FakePlatform, smtp: SmtpSink, sink: HttpSink
) -> None:
    with TestClient(create_app(names_rt)) as client:
        _send(names_rt, client)
        [mail] = smtp.mails
        html, text = mail.part("text/html") or "", mail.part("text/plain") or ""
        # Alice by the payload's name; the group by the catalog's (the payload has none): no raw reference.
        assert "Alice Rossi, Analytics Team" in html and "Requested for: Alice Rossi, Analytics Team" in text
        assert "user:default/" not in html + text and TEAM not in html + text
        # The button: platform.ui_url + the payload's relativeLink; a link in the text part.
        assert f'<a href="{BUTTON}" target="_blank"' in html and ">Open Invoices in the platform</a>" in html
        assert f"Open Invoices in the platform: {BUTTON}" in text
        # The chat-like hooks too (txt): by name.
        assert "Requested for: Alice Rossi, Analytics Team" in sink.at("/owners")[0].json()["message"]
        assert TEAM in platform.lookups

        # Cached in Redis: the next notification asks the platform for no name.
        platform.lookups.clear()
        _send(names_rt, client)
    assert len(smtp.mails) == 2 and "Analytics Team" in (smtp.mails[1].part("text/plain") or "")
    assert platform.lookups == []


def test_the_pages_say_who_they_are_for_and_name_the_channel_by_its_label(
    names_rt: Runtime, platform: FakePlatform, smtp: SmtpSink
) -> None:
    with TestClient(create_app(names_rt)) as client:
        _send(names_rt, client)
        [mail] = smtp.mails
        unsubscribe = urlsplit(str(mail.message["List-Unsubscribe"])[1:-1]).path
        confirm = client.get(unsubscribe).text
        assert "For <strong>Alice Rossi</strong>" in confirm  # the name the payload gave her, kept for her pages
        assert "<strong>Access control request failed</strong> on E-mail." in confirm
        done = client.post(unsubscribe, data={"List-Unsubscribe": "One-Click"}).text
        assert "You will no longer receive <strong>Access control request failed</strong> on E-mail." in done
        assert "requester-email" not in confirm + done

        page = _page(client, "user:default/alice.rossi")
        assert "For <strong>Alice Rossi</strong>" in page and "E-mail · 1 in 30 days" in page
        assert "user:default/alice.rossi" not in page and "requester-email" not in page
        assert "For <strong>Carla Neri</strong>" in _page(client, "user:default/carla.neri")  # the catalog's name
        assert "For <strong>zed</strong>" in _page(client, "user:default/zed")  # nobody's: readable
        assert "For <strong>bob@example.com</strong>" in _page(client, "bob@example.com")


def test_a_slow_platform_neither_holds_a_page_nor_fails_an_email(
    names_rt: Runtime, platform: FakePlatform, smtp: SmtpSink
) -> None:
    platform.delay = 2.0  # longer than relay waits for a name (platform.timeout 1s; a page NAME_WAIT)
    with TestClient(create_app(names_rt)) as client:
        started = time.monotonic()
        page = _page(client, "user:default/carla.neri")
        took = time.monotonic() - started
        assert "For <strong>carla.neri</strong>" in page
        assert took < NAME_WAIT + 0.8, took
        event_id = _send(names_rt, client)
    [mail] = smtp.mails
    # Delivered at once, the group shown readable: the platform is not asked again for a while.
    assert "Requested for: Alice Rossi, analytics-team (group)" in (mail.part("text/plain") or "")
    records = names_rt.store.deliveries(names_rt.store.event_delivery_ids(event_id))
    [email] = [r for r in records if r is not None and r.channel == "requester-email"]
    assert email.state == "delivered" and email.attempts == 1


def test_preview_names_people_as_sending_does(
    names_rt: Runtime, platform: FakePlatform, sink: HttpSink, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`relay preview` asks the catalog for the names the payload lacks, as a send does: what it shows is what
    goes out (issue 38: previews match sends)."""
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps(sample_notification()))
    config = tmp_path / "config.json"
    config.write_text(names_rt.config.model_dump_json())
    assert main(["preview", str(payload), "--config", str(config), "--format", "json"]) == 0
    planned = json.loads(capsys.readouterr().out)["deliveries"]
    [owners] = [d for d in planned if d["channel"] == "owners-hook"]
    assert "Requested for: Alice Rossi, Analytics Team" in owners["body"]
    assert TEAM in platform.lookups

    with TestClient(create_app(names_rt)) as client:
        _send(names_rt, client)
    assert sink.at("/owners")[0].json()["message"] == owners["body"]
