"""Conversations in e-mail, against the SMTP sink: every message has a Message-ID relay makes; a reply carries
In-Reply-To (the first's) and References (the first's, then the previous ones'); one conversation per person."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.testclient import TestClient

from relay.cli.preview import preview, preview_plan
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.threads.model import MAX_REFERENCES, Conversation, mail_headers
from relay.threads.store import Threads
from tests.conftest import admin, post, run_scheduled, run_worker, sample_notification
from tests.delivery.test_slack_dm import REQUESTER, person
from tests.servers import Mail, SmtpSink

ALICE = person("user:default/alice.rossi", "alice.rossi@example.com")
CARLA = person("user:default/carla.neri", "carla.neri@example.com")


def requesters(thing: str, *people: dict[str, Any]) -> dict[str, Any]:
    payload = sample_notification()
    message = payload["messages"][1]
    message["recipients"] = list(people)
    payload["messages"] = [message]
    payload["body"]["thing"] = thing
    return payload


def threaded(make_runtime: Callable[..., Runtime], key: str = "{{ body.thing }}") -> Runtime:
    rt: Runtime = make_runtime(
        routes=[{"recipient_types": [REQUESTER], "channels": ["requester-email"], "thread": key}],
        default={"channels": []},
    )
    return rt


def send_all(rt: Runtime, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    with TestClient(create_app(rt)) as client:
        for payload in payloads:
            assert post(client, payload).status_code == 202
            rt.clock.advance(0.001)  # type: ignore[attr-defined]
        for _ in range(5):
            run_worker(rt)
            if not run_scheduled(rt):
                break
        return [
            d
            for p in payloads
            for d in admin(client, f"/api/v1/events/{p['metadata']['eventId']}").json()["deliveries"]
        ]


def to(smtp: SmtpSink, address: str) -> list[Mail]:
    return [m for m in smtp.mails if address in m.envelope_to]


def test_replies_name_the_first_message_and_each_person_has_a_conversation(
    make_runtime: Callable[..., Runtime], smtp: SmtpSink
) -> None:
    rt = threaded(make_runtime)
    records = send_all(rt, [requesters("A", ALICE, CARLA) for _ in range(3)])
    assert [r["state"] for r in records] == ["delivered"] * 6
    for address in ("alice.rossi@example.com", "carla.neri@example.com"):
        first, second, third = to(smtp, address)
        ids = [m.message["Message-ID"] for m in (first, second, third)]
        mine = [r for r in records if r["address"] == address]
        assert ids == [f"<{r['id']}@example.com>" for r in mine]  # relay's own, one per delivery
        assert first.message["In-Reply-To"] is None and first.message["References"] is None
        assert second.message["In-Reply-To"] == third.message["In-Reply-To"] == ids[0]
        assert second.message["References"] == ids[0]
        assert third.message["References"] == f"{ids[0]} {ids[1]}"
        assert second.subject == first.subject  # the template's, unchanged
        assert [r["thread"] for r in mine] == [
            {"key": "A", "root": mine[0]["id"], "reply": False},
            {"key": "A", "root": mine[0]["id"], "reply": True},
            {"key": "A", "root": mine[0]["id"], "reply": True},
        ]
    assert len(set(m.message["Message-ID"] for m in smtp.mails)) == 6


def test_an_empty_key_threads_nothing_yet_each_mail_has_relays_message_id(
    make_runtime: Callable[..., Runtime], smtp: SmtpSink
) -> None:
    rt = threaded(make_runtime, key="{{ body.nothing | default('') }}")
    records = send_all(rt, [requesters("A", ALICE), requesters("A", ALICE)])
    assert [r["state"] for r in records] == ["delivered"] * 2 and all("thread" not in r for r in records)
    assert sorted(m.message["Message-ID"] for m in smtp.mails) == sorted(f"<{r['id']}@example.com>" for r in records)
    assert all(m.message["In-Reply-To"] is None for m in smtp.mails)
    assert not rt.redis.keys("relay:thread:*")


def test_references_keep_the_first_and_the_latest() -> None:
    mails = [f"d{n}" for n in range(MAX_REFERENCES)]
    headers = mail_headers("dnew", "relay@example.com", Conversation("d0", None, mails))
    refs = headers["References"].split()
    assert headers["In-Reply-To"] == "<d0@example.com>" and len(refs) == MAX_REFERENCES
    assert refs[0] == "<d0@example.com>" and refs[-1] == f"<d{MAX_REFERENCES - 1}@example.com>"


def test_preview_says_whether_it_starts_or_replies_and_why_a_channel_is_unthreaded(
    make_runtime: Callable[..., Runtime], smtp: SmtpSink
) -> None:
    rt: Runtime = make_runtime(
        routes=[
            {
                "recipient_types": [REQUESTER],
                "channels": ["requester-email", "audit-hook"],
                "thread": "{{ body.thing }}",
            }
        ],
        default={"channels": []},
    )
    payload = requesters("A", ALICE)
    shown = {i["channel"]: i for i in preview_plan(rt.config, payload, conversations=Threads(rt.redis).get)}
    assert shown["requester-email"]["thread"] == "starts a conversation (key 'A')"
    assert shown["audit-hook"]["thread"] == "unthreaded: a json channel has no threads: sent unthreaded"
    (first,) = [r for r in send_all(rt, [payload]) if r["channel"] == "requester-email"]
    text = preview(preview_plan(rt.config, requesters("A", ALICE), conversations=Threads(rt.redis).get))
    assert f"    thread: replies in the conversation of key 'A' (its first message: delivery {first['id']})" in text


def test_a_markdown_mail_channel_goes_unthreaded_and_check_warns(
    make_runtime: Callable[..., Runtime], smtp: SmtpSink
) -> None:
    """`format: md` mail is sent by Apprise's own path, without relay's Message-ID: it cannot thread."""
    from relay.cli.checks import check_all

    rt = make_runtime(
        channels={"requester-email": {"url": smtp.url(), "per_recipient": True, "format": "md"}},
        routes=[{"recipient_types": [REQUESTER], "channels": ["requester-email"], "thread": "{{ body.thing }}"}],
        default={"channels": []},
    )
    _, warnings, _ = check_all(rt.config)
    assert any("requester-email: an e-mail channel with `format: md`" in w for w in warnings), warnings
    shown = send_all(rt, [requesters("A", ALICE), requesters("A", ALICE)])
    assert [d["state"] for d in shown] == ["delivered"] * 2 and all("In-Reply-To" not in m.message for m in smtp.mails)
    assert all("thread" not in d for d in shown)  # planned unthreaded
