"""Conversations on Slack (SPEC "Conversations: follow-ups in one thread"): the first message of a key is posted
as today and its `ts` kept; later ones are posted with `thread_ts`. Slack's Web API is intercepted at the HTTP
call, as in tests/delivery/test_slack_dm.py, and the exact payloads asserted; Redis and the worker are real."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import responses
from starlette.testclient import TestClient

from relay.cli.checks import check_all
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from tests.conftest import admin, post, run_scheduled, run_worker
from tests.delivery.test_slack_dm import BOT_TOKEN, OWNER, REQUESTER, FakeSlack, payload_for, person

HOOK_URL = "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ"
HOOK_POST = "https://hooks.slack.com/services/T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ"
KEY = "{{ body.thing }}"


class CountingSlack(FakeSlack):
    """Each post answered with a `ts` of its own: 1700000000.000001, .000002, ..."""

    def __init__(self, mock: responses.RequestsMock) -> None:
        super().__init__(mock)
        self.mock = mock

    def _post(self, request: Any) -> tuple[int, dict[str, str], str]:
        status, headers, body = super()._post(request)
        answer = json.loads(body)
        if answer.get("ok"):  # a channel's id, as Slack answers (a DM's: D + the user's id)
            answer["ts"] = f"1700000000.{len(self.of('chat.postMessage')):06d}"
            answer["channel"] = answer["channel"].replace("D#data-owners", "C0OWNERS")
        return status, headers, json.dumps(answer)


@pytest.fixture
def slack() -> Iterator[CountingSlack]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add_passthru("http://127.0.0.1")
        mock.add(responses.POST, HOOK_POST, body="ok")
        yield CountingSlack(mock)


@pytest.fixture
def threaded(make_runtime: Callable[..., Runtime]) -> Callable[..., Runtime]:
    def make(owners_url: str = f"slack://{BOT_TOKEN}/#data-owners", **route: Any) -> Runtime:
        rt: Runtime = make_runtime(
            channels={
                "requester-slack": {"url": f"slack://{BOT_TOKEN}/{{email}}", "per_recipient": True},
                "owners-slack": {"url": owners_url},
            },
            routes=[
                {"recipient_types": [REQUESTER], "channels": ["requester-slack"], "thread": KEY, **route},
                {"recipient_types": [OWNER], "channels": ["owners-slack"], "thread": KEY, **route},
            ],
            default={"channels": []},
        )
        return rt

    return make


def notification(thing: str, *requesters: dict[str, Any], owners: bool = True) -> dict[str, Any]:
    payload = payload_for(*requesters, owners=owners)
    payload["body"]["thing"] = thing
    payload["messages"] = payload["messages"][:1] if owners and not requesters else payload["messages"]
    return payload


def send_all(rt: Runtime, client: TestClient, payloads: list[dict[str, Any]]) -> None:
    for payload in payloads:
        assert post(client, payload).status_code == 202
        rt.clock.advance(0.001)  # type: ignore[attr-defined]  # received in turn: a millisecond apart at least
    for _ in range(5):  # a message that waited its turn goes when the one before it ends
        run_worker(rt)
        if not run_scheduled(rt):
            break


def records(client: TestClient, payload: dict[str, Any]) -> list[dict[str, Any]]:
    return list(admin(client, f"/api/v1/events/{payload['metadata']['eventId']}").json()["deliveries"])


def posts(slack: FakeSlack) -> list[dict[str, Any]]:
    return [body for _, _, body in slack.of("chat.postMessage")]


def test_three_of_one_key_post_one_message_and_two_replies_and_another_key_starts_its_own(
    threaded: Callable[..., Runtime], slack: CountingSlack
) -> None:
    rt = threaded()
    payloads = [notification("A"), notification("A"), notification("B"), notification("A")]
    with TestClient(create_app(rt)) as client:
        send_all(rt, client, payloads)
        shown = [records(client, p)[0] for p in payloads]
    sent = posts(slack)
    assert [b["channel"] for b in sent if "thread_ts" not in b] == ["#data-owners"] * 2
    assert [b["channel"] for b in sent if "thread_ts" in b] == ["C0OWNERS"] * 2  # the id Slack answered with
    starts = [f"1700000000.{n:06d}" for n, b in enumerate(sent, 1) if "thread_ts" not in b]
    replies = [b["thread_ts"] for b in sent if "thread_ts" in b]
    assert len(starts) == 2 and replies == [replies[0]] * 2 and replies[0] in starts  # A's first and B's
    assert sent[0].get("thread_ts") is None or sent[0]["thread_ts"] != replies[0]
    assert not any("reply_broadcast" in b for b in sent)
    assert [s["state"] for s in shown] == ["delivered"] * 4
    root = shown[0]["id"]
    assert shown[0]["thread"] == {"key": "A", "root": root, "reply": False}
    assert shown[1]["thread"] == shown[3]["thread"] == {"key": "A", "root": root, "reply": True}
    assert shown[2]["thread"] == {"key": "B", "root": shown[2]["id"], "reply": False}


def test_a_reply_is_broadcast_when_the_route_asks(threaded: Callable[..., Runtime], slack: CountingSlack) -> None:
    rt = threaded(thread_broadcast=True)
    with TestClient(create_app(rt)) as client:
        send_all(rt, client, [notification("A"), notification("A")])
    first, reply = posts(slack)
    assert "thread_ts" not in first and "reply_broadcast" not in first
    assert reply["thread_ts"] == "1700000000.000001" and reply["reply_broadcast"] is True


def test_direct_messages_thread_per_person(threaded: Callable[..., Runtime], slack: CountingSlack) -> None:
    rt = threaded()
    alice = person("user:default/alice.rossi", "alice.rossi@example.com")
    dario = person("user:default/dario.blu", "dario.blu@example.com")
    with TestClient(create_app(rt)) as client:
        send_all(rt, client, [notification("A", alice, dario, owners=False)])
        send_all(rt, client, [notification("A", alice, dario, owners=False)])
    sent = posts(slack)
    firsts = {b["channel"]: b for b in sent if "thread_ts" not in b}
    assert sorted(firsts) == ["U0ALICE", "U0DARIO"]
    replies = sorted((b["channel"], b["thread_ts"]) for b in sent if "thread_ts" in b)
    # A reply goes to the DM channel Slack answered with, in reply to that person's own first message.
    assert [channel for channel, _ in replies] == ["DU0ALICE", "DU0DARIO"]
    ts_of = {b["channel"]: f"1700000000.{sent.index(b) + 1:06d}" for b in firsts.values()}
    assert dict(replies) == {"DU0ALICE": ts_of["U0ALICE"], "DU0DARIO": ts_of["U0DARIO"]}


def test_a_first_message_that_fails_lets_the_second_start_the_conversation(
    threaded: Callable[..., Runtime], slack: CountingSlack
) -> None:
    rt = threaded()
    slack.script["chat.postMessage"] = [(200, {}, {"ok": False, "error": "channel_not_found"})]
    payloads = [notification("A"), notification("A"), notification("A")]
    with TestClient(create_app(rt)) as client:
        send_all(rt, client, payloads)
        shown = [records(client, p)[0] for p in payloads]
    assert [s["state"] for s in shown] == ["failed", "delivered", "delivered"]
    failed, started, reply = posts(slack)
    assert "thread_ts" not in failed and "thread_ts" not in started
    assert reply["thread_ts"] == "1700000000.000002"
    assert shown[0]["thread"] == {"key": "A", "root": None, "reply": False}
    assert shown[2]["thread"] == {"key": "A", "root": shown[1]["id"], "reply": True}


def test_an_incoming_webhook_channel_goes_unthreaded_and_check_warns(
    threaded: Callable[..., Runtime], slack: CountingSlack
) -> None:
    rt = threaded(owners_url=HOOK_URL)
    _, warnings, _ = check_all(rt.config)
    assert any("channel owners-slack: an incoming-webhook Slack URL cannot reply in a thread" in w for w in warnings)
    payloads = [notification("A"), notification("A")]
    with TestClient(create_app(rt)) as client:
        send_all(rt, client, payloads)
        shown = [records(client, p)[0] for p in payloads]
    hooks = [c for c in slack.mock.calls if c.request.url == HOOK_POST]
    assert len(hooks) == 2 and all("thread_ts" not in json.loads(c.request.body) for c in hooks)
    assert [s["state"] for s in shown] == ["delivered"] * 2 and all("thread" not in s for s in shown)


def test_messages_whose_hold_ends_together_go_in_order_and_reply(
    threaded: Callable[..., Runtime], slack: CountingSlack
) -> None:
    """Held together (a silence, quiet hours, a channel down), they come due together: the first starts the
    conversation and the others reply to it, in the order received (each waits while an earlier one goes)."""
    rt = threaded()
    payloads = [notification("A") for _ in range(3)]
    with TestClient(create_app(rt)) as client:
        body = {"matchers": ['channel="owners-slack"'], "duration": "1h", "createdBy": "ops", "comment": "deploy"}
        silence = admin(client, "/api/v1/silences", "POST", json=body).json()
        for payload in payloads:
            assert post(client, payload).status_code == 202
            rt.clock.advance(0.001)  # type: ignore[attr-defined]
        run_worker(rt)  # held, not past the silence's end (no scheduled wake-up run)
        assert [records(client, p)[0]["state"] for p in payloads] == ["held"] * 3 and posts(slack) == []
        assert admin(client, f"/api/v1/silences/{silence['id']}", "DELETE").json()["released"] == 3
        send_all(rt, client, [])
        shown = [records(client, p)[0] for p in payloads]
    first, *replies = posts(slack)
    assert "thread_ts" not in first and [r["thread_ts"] for r in replies] == ["1700000000.000001"] * 2
    assert [s["state"] for s in shown] == ["delivered"] * 3
    assert [s["thread"] for s in shown] == [{"key": "A", "root": shown[0]["id"], "reply": r} for r in (0, 1, 1)]


@pytest.mark.parametrize("url", [f"slack://{BOT_TOKEN}/#data-owners/#audit", f"slack://{BOT_TOKEN}/?to=%23data-owners"])
def test_a_url_naming_several_channels_goes_unthreaded_and_check_warns(
    threaded: Callable[..., Runtime], slack: CountingSlack, url: str
) -> None:
    """A reply goes to one thread of one channel: with several targets (or `to=`) no message would be lost or
    posted twice by threading, but none can be one conversation."""
    rt = threaded(owners_url=url)
    _, warnings, _ = check_all(rt.config)
    assert any("channel owners-slack: a Slack URL naming several channels" in w for w in warnings), warnings
    with TestClient(create_app(rt)) as client:
        send_all(rt, client, [notification("A"), notification("A")])
    assert posts(slack) and all("thread_ts" not in b for b in posts(slack))
