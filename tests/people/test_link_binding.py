"""What a person's link may change (issue #34, read as a caller holding the webhook credential): a link in a
message to an address changes only that address's person, unless the platform catalog ties the address to the
recipient's userRef; one click changes its own kind on its own channel only; the unsubscribe page grants nothing
more than its link; and a userRef relay cannot key a person by never gets an "unsubscribed" that is ignored.
Real parts: the app, relay's own RQ worker, a real SMTP server, the platform played by a local HTTP server."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from redis import Redis
from starlette.testclient import TestClient

from relay.cli import main
from relay.preferences.model import PreferenceError
from relay.preferences.store import Preferences
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.web.links import SCOPE_PREFERENCES, SCOPE_UNSUBSCRIBE, Link, LinkRefused, make_token, read_token
from tests.conftest import admin, post, run_worker, sample_notification
from tests.platform_fake import ACCESS_TOKEN, FakePlatform
from tests.servers import HttpSink, SmtpSink

SECRET = "a-secret-of-at-least-thirty-two-bytes!"
PUBLIC = "http://testserver"
ALICE = "user:default/alice.rossi"
ALICE_MAIL = "alice.rossi@example.com"
MALLORY_MAIL = "mallory@evil.example"
KIND = "notification:access-control-request-failed"
CSRF = re.compile(r'name="csrf" value="([0-9a-f]{64})"')
PAGE_LINK = re.compile(r'href="(/preferences/[A-Za-z0-9_.-]+)"')
DAY = 86400.0


@pytest.fixture
def platform() -> Iterator[FakePlatform]:
    fake = FakePlatform(users={"alice.rossi": ALICE_MAIL, "dario.blu": "dario.blu@example.com"}).start()
    yield fake
    fake.stop()


def _runtime(make_runtime: Callable[..., Runtime], tmp_path: Path, **extra: Any) -> Runtime:
    rt: Runtime = make_runtime(
        preferences={"public_url": PUBLIC, "secret": SECRET},
        templates={"dir": str(tmp_path / "templates"), "builtin": True},
        **extra,
    )
    return rt


def _catalog(platform: FakePlatform) -> dict[str, Any]:
    return {"url": platform.url, "access_token": ACCESS_TOKEN, "timeout": "1s"}


def _to(recipient: dict[str, Any], kind: str = KIND) -> dict[str, Any]:
    """A notification to one requester (routed to the per-recipient e-mail channel only)."""
    return sample_notification(
        kind=kind,
        messages=[
            {
                "recipientType": "recipient-type:access-control-requester",
                "recipientType_v2": "recipient-type:access-control-requester",
                "recipients": [recipient],
                "title": "Your access request failed",
                "message": "Your request failed.",
            }
        ],
    )


def _mail_to(smtp: SmtpSink, rt: Runtime, client: TestClient, recipient: dict[str, Any], kind: str = KIND) -> Any:
    smtp.clear()
    payload = _to(recipient, kind)
    assert post(client, payload).status_code == 202
    run_worker(rt)
    [mail] = smtp.mails
    return mail


def _state(rt: Runtime, client: TestClient, recipient: dict[str, Any], kind: str = KIND) -> str:
    payload = _to(recipient, kind)
    assert post(client, payload).status_code == 202
    run_worker(rt)
    event = admin(client, f"/api/v1/events/{payload['metadata']['eventId']}").json()
    [email] = [d for d in event["deliveries"] if d["channel"] == "requester-email"]
    return str(email["state"])


def _unsubscribe(mail: Any) -> str:
    return urlsplit(str(mail.message["List-Unsubscribe"])[1:-1]).path


def _unsubscribe_link(rt: Runtime, mail: Any) -> Link:
    return read_token(SECRET, _unsubscribe(mail).rsplit("/", 1)[1], SCOPE_UNSUBSCRIBE, rt.clock(), DAY)


def _page(mail: Any) -> str:
    found = re.search(rf"{PUBLIC}(/preferences/[A-Za-z0-9_.-]+)", mail.part("text/plain") or "")
    assert found is not None
    return found.group(1)


def _prefs(client: TestClient, person: str) -> dict[str, Any]:
    return dict(admin(client, f"/api/v1/people/{quote(person, safe='')}/preferences").json())


def _one_click(client: TestClient, path: str) -> Any:
    return client.post(path, data={"List-Unsubscribe": "One-Click"})


def _user(ref: str | None, email: str | None) -> dict[str, Any]:
    return {"userRef": ref, "metadata.name": None, "spec.email": email, "kind": "User"}


def test_mallorys_links_cannot_change_alices_preferences(
    make_runtime: Callable[..., Runtime], tmp_path: Path, smtp: SmtpSink
) -> None:
    """Mallory holds the webhook credential and pairs Alice's userRef with her own address, once relay has sent
    Alice's links to Alice's address: the links Mallory gets change only her address's preferences; Alice's
    next notification reaches her, at any hour."""
    rt = _runtime(make_runtime, tmp_path)
    with TestClient(create_app(rt)) as client:
        assert _state(rt, client, _user(ALICE, ALICE_MAIL)) == "delivered"  # her address, bound to her userRef
        mail = _mail_to(smtp, rt, client, _user(ALICE, MALLORY_MAIL))
        assert mail.envelope_to == [MALLORY_MAIL]
        assert _one_click(client, _unsubscribe(mail)).status_code == 200
        page = client.get(_page(mail))
        assert page.status_code == 200 and MALLORY_MAIL in page.text and ALICE not in page.text
        assert "Alice Rossi" not in page.text  # nor her name: the payload gave it to her userRef, not this address
        csrf = CSRF.search(page.text)
        assert csrf is not None
        sunday_night = {"hours": "set", "day": "sunday", "start": "03:00", "end": "03:01", "zone": "UTC"}
        saved = client.post(_page(mail), data={**sunday_night, "csrf": csrf.group(1)}, follow_redirects=False)
        assert saved.status_code == 303
        assert _prefs(client, ALICE)["optOuts"] == [] and _prefs(client, ALICE)["activeHours"] is None
        mallory = _prefs(client, MALLORY_MAIL)
        assert mallory["optOuts"] == [{"kind": KIND, "channel": "requester-email"}] and mallory["activeHours"]
        # Alice's own notification: sent now, not skipped, not held until Sunday 03:00.
        assert _state(rt, client, _user(ALICE, ALICE_MAIL)) == "delivered"
        # Mallory's choices bind her address, whatever userRef a payload pairs it with.
        assert _state(rt, client, _user(ALICE, MALLORY_MAIL)) == "skipped"


def _shown(rt: Runtime, tmp_path: Path, address: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """`relay prefs show <address>`: the userRefs it names as governing the address, in its text and its JSON."""
    config = tmp_path / "cli.json"
    config.write_text(json.dumps(rt.config.model_dump(mode="json", by_alias=True, exclude={"base_dir"})))
    capsys.readouterr()
    assert main(["prefs", "show", address, "--config", str(config)]) == 0
    text = capsys.readouterr().out
    assert main(["prefs", "show", address, "--format", "json", "--config", str(config)]) == 0
    refs: list[str] = json.loads(capsys.readouterr().out)["governedBy"]
    assert [line.split()[3].removesuffix("'s") for line in text.splitlines() if "also governed by" in line] == refs
    return refs


def test_without_a_catalog_the_first_address_of_a_user_ref_is_theirs(
    make_runtime: Callable[..., Runtime], tmp_path: Path, smtp: SmtpSink, capsys: pytest.CaptureFixture[str]
) -> None:
    """No catalog: the first address relay sends a userRef's links to is that person's (SPEC: a person is their
    userRef), so Alice's one-click opts her userRef out; a later address paired with her userRef is its own
    person, and an operator can unbind her (a new e-mail address)."""
    rt = _runtime(make_runtime, tmp_path)
    with TestClient(create_app(rt)) as client:
        mail = _mail_to(smtp, rt, client, _user(ALICE, ALICE_MAIL))
        assert _one_click(client, _unsubscribe(mail)).status_code == 200
        assert _prefs(client, ALICE)["optOuts"] == [{"kind": KIND, "channel": "requester-email"}]
        assert _prefs(client, ALICE_MAIL)["optOuts"] == []
        assert _shown(rt, tmp_path, ALICE_MAIL.upper(), capsys) == [ALICE]  # `relay prefs show` says whose it is
        later = _mail_to(smtp, rt, client, _user(ALICE, MALLORY_MAIL), kind="notification:data-contract-changed")
        assert _unsubscribe_link(rt, later).person == MALLORY_MAIL
        assert Preferences(rt.redis).unbind(ALICE)
        assert _shown(rt, tmp_path, ALICE_MAIL, capsys) == []
        again = _mail_to(smtp, rt, client, _user(ALICE, MALLORY_MAIL), kind="notification:data-contract-changed")
        assert _unsubscribe_link(rt, again).person == ALICE


def test_the_catalog_ties_an_address_to_its_user_ref(
    make_runtime: Callable[..., Runtime], tmp_path: Path, smtp: SmtpSink, platform: FakePlatform
) -> None:
    """With the platform's catalog: Alice's link (to the address the catalog gives for her) changes her
    userRef's preferences; Mallory's (to her own address, under Alice's userRef) only Mallory's address's."""
    rt = _runtime(make_runtime, tmp_path, platform=_catalog(platform))
    with TestClient(create_app(rt)) as client:
        mallory = _mail_to(smtp, rt, client, _user(ALICE, MALLORY_MAIL))
        assert _one_click(client, _unsubscribe(mallory)).status_code == 200
        assert _prefs(client, ALICE)["optOuts"] == []
        alice = _mail_to(smtp, rt, client, _user(ALICE, ALICE_MAIL.upper()))
        assert _one_click(client, _unsubscribe(alice)).status_code == 200
        assert _prefs(client, ALICE)["optOuts"] == [{"kind": KIND, "channel": "requester-email"}]
        assert _prefs(client, ALICE_MAIL)["optOuts"] == []
        # Her address looked up in the catalog (none in the payload): her userRef's too.
        looked_up = _mail_to(smtp, rt, client, _user(ALICE, None), kind="notification:data-contract-changed")
        assert looked_up.envelope_to == [ALICE_MAIL]
        token = _unsubscribe(looked_up).rsplit("/", 1)[1]
        link = read_token(SECRET, token, SCOPE_UNSUBSCRIBE, rt.clock(), DAY)
        assert (link.person, link.address) == (ALICE, ALICE_MAIL)
        # The catalog does not answer (for Dario, asked for the first time): the link binds the address the
        # payload gave, never the userRef it claims.
        platform.down = True
        mail = _mail_to(smtp, rt, client, _user("user:default/dario.blu", "dario.blu@example.com"))
        link = read_token(SECRET, _unsubscribe(mail).rsplit("/", 1)[1], SCOPE_UNSUBSCRIBE, rt.clock(), DAY)
        assert (link.person, link.address) == ("dario.blu@example.com", "dario.blu@example.com")
        platform.down = False
        mail = _mail_to(smtp, rt, client, _user("user:default/dario.blu", "dario.blu@example.com"))
        link = read_token(SECRET, _unsubscribe(mail).rsplit("/", 1)[1], SCOPE_UNSUBSCRIBE, rt.clock(), DAY)
        assert link.person == "user:default/dario.blu"  # answering again, it ties them


def test_one_click_changes_only_its_kind_on_its_channel(
    make_runtime: Callable[..., Runtime], tmp_path: Path, smtp: SmtpSink, sink: HttpSink
) -> None:
    """A kind that reads as a pattern (`notification:*`) or that could not be stored (over 200 characters)
    gets no one-click link: one click would opt out of every kind, or make the person's other choices
    unreadable. A link of such a kind, if made, is refused. A valid one adds exactly its opt-out: the same
    kind still reaches her direct messages, another kind her e-mail."""
    channels = {
        "requester-email": {"url": smtp.url(), "per_recipient": True},
        "requester-dm": {"url": sink.url("/dm/{email}"), "per_recipient": True},
    }
    routes = [{"channels": ["requester-email", "requester-dm"]}]
    rt = _runtime(make_runtime, tmp_path, channels=channels, routes=routes, default={"channels": []})
    with TestClient(create_app(rt)) as client:
        put = admin(
            client,
            f"/api/v1/people/{quote(ALICE_MAIL, safe='')}/preferences",
            "PUT",
            json={"optOuts": [{"kind": "notification:output-port-deprecated", "channel": "*"}]},
        )
        assert put.status_code == 200
        before = _prefs(client, ALICE_MAIL)["optOuts"]
        for kind in ("notification:*", "notification:" + "x" * 240):
            mail = _mail_to(smtp, rt, client, _user(None, ALICE_MAIL), kind=kind)
            assert mail.message["List-Unsubscribe"] is None, kind
            assert "Manage your notifications" in (mail.part("text/html") or "")  # her page is still linked
            forged = make_token(SECRET, Link(ALICE_MAIL, SCOPE_UNSUBSCRIBE, rt.clock(), kind, "requester-email"))
            assert _one_click(client, f"/unsubscribe/{forged}").status_code == 403
        assert _prefs(client, ALICE_MAIL)["optOuts"] == before
        mail = _mail_to(smtp, rt, client, _user(None, ALICE_MAIL))
        assert _one_click(client, _unsubscribe(mail)).status_code == 200
        assert _prefs(client, ALICE_MAIL)["optOuts"] == [*before, {"kind": KIND, "channel": "requester-email"}]
        assert _state(rt, client, _user(None, ALICE_MAIL), kind="notification:data-contract-changed") == "delivered"
        sink.clear()
        assert _state(rt, client, _user(None, ALICE_MAIL)) == "skipped"
        assert len(sink.at(f"/dm/{ALICE_MAIL}")) == 1  # the same kind on her other channel


def test_the_unsubscribe_page_grants_no_longer_lived_or_wider_link(
    make_runtime: Callable[..., Runtime], tmp_path: Path, smtp: SmtpSink
) -> None:
    """The page an unsubscribe link opens links to the same person's page, bound to the same address and made
    when the unsubscribe link was: it expires with it."""
    rt = _runtime(make_runtime, tmp_path)
    sent_at = 1_800_000_000.0
    rt.clock.set(sent_at)
    with TestClient(create_app(rt)) as client:
        mail = _mail_to(smtp, rt, client, _user(None, ALICE_MAIL))
        token = _unsubscribe(mail).rsplit("/", 1)[1]
        unsub = read_token(SECRET, token, SCOPE_UNSUBSCRIBE, sent_at, DAY)
        rt.clock.set(sent_at + 80 * DAY)  # days later, within the 90-day TTL
        for answer in (client.get(_unsubscribe(mail)), _one_click(client, _unsubscribe(mail))):
            found = PAGE_LINK.search(answer.text)
            assert answer.status_code == 200 and found is not None
            page = read_token(SECRET, found.group(1).rsplit("/", 1)[1], SCOPE_PREFERENCES, rt.clock(), 90 * DAY)
            assert (page.person, page.issued) == (ALICE_MAIL, unsub.issued)
            assert page.address == unsub.address == ALICE_MAIL
        rt.clock.set(sent_at + 90 * DAY + 1)
        assert client.get(found.group(1)).status_code == 410  # past the unsubscribe link's own expiry


@pytest.mark.parametrize(
    "ref",
    ["user:default/" + "a" * 320, "user:default/alice\x07rossi", "user:default/alice\nrossi"],
    ids=["over-320-characters", "bell", "newline"],
)
def test_a_user_ref_relay_cannot_key_gets_an_opt_out_that_takes_effect(
    make_runtime: Callable[..., Runtime], tmp_path: Path, smtp: SmtpSink, ref: str
) -> None:
    """A userRef that cannot be a person's key (over 320 characters, a control character): the person is the
    address, so the one-click opt-out is kept under a key planning reads, and the next notification is skipped."""
    rt = _runtime(make_runtime, tmp_path)
    with TestClient(create_app(rt)) as client:
        mail = _mail_to(smtp, rt, client, _user(ref, "carla@example.com"))
        done = _one_click(client, _unsubscribe(mail))
        assert done.status_code == 200 and "You are unsubscribed" in done.text
        assert _prefs(client, "carla@example.com")["optOuts"] == [{"kind": KIND, "channel": "requester-email"}]
        assert _state(rt, client, _user(ref, "carla@example.com")) == "skipped"


def test_an_opt_out_that_could_not_be_kept_is_not_answered_as_done(
    make_runtime: Callable[..., Runtime], tmp_path: Path, smtp: SmtpSink
) -> None:
    """A person with as many opt-outs as relay keeps (200): one more is refused (409), never answered
    "unsubscribed" and then stored where it would make every choice of theirs unreadable."""
    rt = _runtime(make_runtime, tmp_path)
    with TestClient(create_app(rt)) as client:
        many = [{"kind": f"notification:k{i}", "channel": "requester-email"} for i in range(200)]
        path = f"/api/v1/people/{quote(ALICE_MAIL, safe='')}/preferences"
        assert admin(client, path, "PUT", json={"optOuts": many}).status_code == 200
        mail = _mail_to(smtp, rt, client, _user(None, ALICE_MAIL))
        refused = _one_click(client, _unsubscribe(mail))
        assert refused.status_code == 409 and "not unsubscribed" in refused.json()["userMessage"]
        assert len(_prefs(client, ALICE_MAIL)["optOuts"]) == 200
        assert _state(rt, client, _user(None, ALICE_MAIL), kind="notification:k7") == "skipped"


def test_no_link_for_a_person_relay_cannot_keep_preferences_for(
    make_runtime: Callable[..., Runtime], tmp_path: Path
) -> None:
    """A link for a person key relay would refuse to read (a support desk's, say) is refused when followed
    (403), naming no one: no page that saves nothing."""
    rt = _runtime(make_runtime, tmp_path)
    person = "user:default/" + "a" * 400
    with TestClient(create_app(rt)) as client:
        token = make_token(SECRET, Link(person, SCOPE_PREFERENCES, rt.clock()))
        answer = client.get(f"/preferences/{token}")
        assert answer.status_code == 403 and "aaaa" not in answer.text
    with pytest.raises(LinkRefused):
        read_token(SECRET, token, SCOPE_PREFERENCES, rt.clock(), DAY)


def test_the_store_writes_nothing_it_would_not_read_back(redis: Redis) -> None:
    """The rule reading applies (relay.preferences.model.from_stored) is applied before writing: a person key or a
    change it would refuse raises, and what was stored stays readable."""
    store = Preferences(redis)
    for person in ("user:default/" + "a" * 320, "user:default/a\x07b", "group:default/team"):
        with pytest.raises(PreferenceError):
            store.update(person, lambda p: p.with_opt_out(KIND, "requester-email"), 0.0)
    assert redis.keys("relay:prefs*") == []
    store.update(ALICE_MAIL, lambda p: p.with_opt_out(KIND, "requester-email"), 0.0)
    with pytest.raises(PreferenceError):
        store.update(ALICE_MAIL, lambda p: p.with_opt_out("notification:" + "x" * 240, "requester-email"), 1.0)
    kept = store.get(ALICE_MAIL)
    assert kept is not None and [o.kind for o in kept.optOuts] == [KIND]
