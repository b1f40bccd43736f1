"""Slack direct messages end to end: a `per_recipient` channel `slack://xoxb-…/{email}` (Apprise's bot
mode) looks each person up with users.lookupByEmail, then posts chat.postMessage to them.

Slack cannot be reached from here: `responses` intercepts the HTTP calls at the requests layer (in the
worker's threads too) and the tests assert the exact calls. The platform catalog, Redis and the worker
are real; calls to 127.0.0.1 pass through.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import responses
from rq import Queue
from rq.registry import ScheduledJobRegistry
from starlette.testclient import TestClient

from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.storage.work_queue import QUEUE_NAME
from tests.conftest import admin, post, run_scheduled, run_worker, sample_notification
from tests.platform_fake import ACCESS_TOKEN, FakePlatform

BOT_TOKEN = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
LOOKUP = "https://slack.com/api/users.lookupByEmail"
POST = "https://slack.com/api/chat.postMessage"
REQUESTER = "recipient-type:access-control-requester"
OWNER = "recipient-type:system-owner"
USERS = {
    "alice.rossi@example.com": "U0ALICE",
    "carla.neri@example.com": "U0CARLA",
    "dario.blu@example.com": "U0DARIO",
}


class FakeSlack:
    """Slack's Web API as `responses` callbacks: users from USERS, answers scripted per method."""

    def __init__(self, mock: responses.RequestsMock) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []  # (method, authorization, params or body)
        self.script: dict[str, list[tuple[int, dict[str, str], dict[str, Any]]]] = {}
        self.answered_at: dict[str, list[float]] = {}
        mock.add_callback(responses.GET, LOOKUP, callback=self._lookup)
        mock.add_callback(responses.POST, POST, callback=self._post)

    def _scripted(self, method: str) -> tuple[int, dict[str, str], str] | None:
        steps = self.script.get(method)
        if not steps:
            return None
        status, headers, body = steps.pop(0)
        self.answered_at.setdefault(method, []).append(time.time())
        return status, headers, json.dumps(body)

    def _lookup(self, request: Any) -> tuple[int, dict[str, str], str]:
        email = parse_qs(urlsplit(request.url).query)["email"][0]
        self.calls.append(("users.lookupByEmail", request.headers["Authorization"], {"email": email}))
        scripted = self._scripted("users.lookupByEmail")
        if scripted is not None:
            return scripted
        if email not in USERS:
            return 200, {}, json.dumps({"ok": False, "error": "users_not_found"})
        return 200, {}, json.dumps({"ok": True, "user": {"id": USERS[email], "profile": {"email": email}}})

    def _post(self, request: Any) -> tuple[int, dict[str, str], str]:
        body = json.loads(request.body)
        self.calls.append(("chat.postMessage", request.headers["Authorization"], body))
        scripted = self._scripted("chat.postMessage")
        if scripted is not None:
            return scripted
        return 200, {}, json.dumps({"ok": True, "channel": "D" + body["channel"], "ts": "1700000000.000100"})

    def of(self, method: str) -> list[tuple[str, str, dict[str, Any]]]:
        return [c for c in self.calls if c[0] == method]


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add_passthru(re.compile(r"http://127\.0\.0\.1(:\d+)?/"))
        yield FakeSlack(mock)


@pytest.fixture
def platform() -> Iterator[FakePlatform]:
    fake = FakePlatform(users={"carla.neri": "carla.neri@example.com", "ghost": None}).start()
    yield fake
    fake.stop()


@pytest.fixture
def make_slack_rt(make_runtime: Callable[..., Runtime], platform: FakePlatform) -> Callable[..., Runtime]:
    """The README's worked example: requesters get a DM, owners the team's channel."""

    def make(**extra: Any) -> Runtime:
        rt: Runtime = make_runtime(
            platform={"url": platform.url, "access_token": ACCESS_TOKEN, "timeout": "2s"},
            channels={
                "requester-slack": {"url": f"slack://{BOT_TOKEN}/{{email}}", "per_recipient": True},
                "owners-slack": {"url": f"slack://{BOT_TOKEN}/#data-owners"},
            },
            routes=[
                {"recipient_types": [REQUESTER], "channels": ["requester-slack"]},
                {"recipient_types": [OWNER], "channels": ["owners-slack"]},
            ],
            default={"channels": []},
            **extra,
        )
        return rt

    return make


@pytest.fixture
def slack_rt(make_slack_rt: Callable[..., Runtime]) -> Runtime:
    return make_slack_rt()


def person(ref: str, email: str | None) -> dict[str, Any]:
    return {"userRef": ref, "metadata.name": ref.rsplit("/", 1)[-1], "spec.email": email, "kind": "User"}


def payload_for(*requesters: dict[str, Any], owners: bool = True) -> dict[str, Any]:
    payload = sample_notification()
    owners_message, requester = payload["messages"][0], payload["messages"][1]
    requester["recipients"] = list(requesters)
    payload["messages"] = [owners_message, requester] if owners else [requester]
    return payload


def deliveries(client: TestClient, payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    event = admin(client, f"/api/v1/events/{payload['metadata']['eventId']}").json()
    return {d["address"] or d["channel"]: d for d in event["deliveries"]}


def scheduled(rt: Runtime) -> list[float]:
    registry = ScheduledJobRegistry(queue=Queue(QUEUE_NAME, connection=rt.redis))
    return [score for _, score in rt.redis.zrange(registry.key, 0, -1, withscores=True)]


def test_one_direct_message_per_recipient_from_payload_and_catalog(slack_rt: Runtime, slack: FakeSlack) -> None:
    payload = payload_for(
        person("user:default/alice.rossi", "alice.rossi@example.com"),
        person("user:default/alice.again", "Alice.Rossi@example.com"),  # the same person: one DM
        person("user:default/carla.neri", None),  # e-mail from the platform catalog
    )
    with TestClient(create_app(slack_rt)) as client:
        assert post(client, payload).status_code == 202
        run_worker(slack_rt)
        records = deliveries(client, payload)

    bearer = f"Bearer {BOT_TOKEN}"
    lookups = sorted(slack.of("users.lookupByEmail"), key=lambda c: c[2]["email"])
    assert lookups == [
        ("users.lookupByEmail", bearer, {"email": "alice.rossi@example.com"}),
        ("users.lookupByEmail", bearer, {"email": "carla.neri@example.com"}),
    ]
    posts = slack.of("chat.postMessage")
    assert all(auth == bearer for _, auth, _ in posts)
    assert sorted(body["channel"] for _, _, body in posts) == ["#data-owners", "U0ALICE", "U0CARLA"]
    dm = next(body for _, _, body in posts if body["channel"] == "U0ALICE")
    # No template of the operator's: the platform's own title and text, verbatim.
    requester_message = payload["messages"][1]
    assert (dm["attachments"][0]["title"], dm["attachments"][0]["text"]) == (
        requester_message["title"],
        requester_message["message"],
    )

    assert records["alice.rossi@example.com"]["state"] == "delivered"
    assert records["alice.rossi@example.com"]["channel"] == "requester-slack"
    assert records["carla.neri@example.com"]["state"] == "delivered"
    assert records["carla.neri@example.com"]["recipient"] == "user:default/carla.neri"
    assert records["owners-slack"]["state"] == "delivered"
    assert len(records) == 3
    for record in records.values():
        assert BOT_TOKEN not in json.dumps(record)


def test_a_person_slack_does_not_know_fails_at_once_with_the_reason(slack_rt: Runtime, slack: FakeSlack) -> None:
    payload = payload_for(
        person("user:default/nobody", "nobody@example.com"),
        person("user:default/alice.rossi", "alice.rossi@example.com"),
    )
    with TestClient(create_app(slack_rt)) as client:
        post(client, payload)
        run_worker(slack_rt)
        records = deliveries(client, payload)

    unknown = records["nobody@example.com"]
    assert unknown["state"] == "failed" and unknown["attempts"] == 1
    assert "users_not_found" in unknown["lastError"]
    assert BOT_TOKEN not in unknown["lastError"]
    assert scheduled(slack_rt) == []  # no retry: asking again would get the same answer
    assert [c[2]["email"] for c in slack.of("users.lookupByEmail")].count("nobody@example.com") == 1
    # Nothing was posted for them; everyone else got theirs.
    assert sorted(body["channel"] for _, _, body in slack.of("chat.postMessage")) == ["#data-owners", "U0ALICE"]
    assert records["alice.rossi@example.com"]["state"] == "delivered"


def test_a_missing_scope_is_named_in_the_reason(slack_rt: Runtime, slack: FakeSlack) -> None:
    slack.script["users.lookupByEmail"] = [
        (200, {}, {"ok": False, "error": "missing_scope", "needed": "users:read.email", "provided": "chat:write"})
    ]
    payload = payload_for(person("user:default/alice.rossi", "alice.rossi@example.com"))
    with TestClient(create_app(slack_rt)) as client:
        post(client, payload)
        run_worker(slack_rt)
        record = deliveries(client, payload)["alice.rossi@example.com"]
    assert record["state"] == "failed"
    assert "users.lookupByEmail answered missing_scope (needed: users:read.email)" in record["lastError"]


@pytest.mark.parametrize("method", ["chat.postMessage", "users.lookupByEmail"])
def test_slack_429_retry_after_is_honoured(slack_rt: Runtime, slack: FakeSlack, method: str) -> None:
    slack.script[method] = [(429, {"Retry-After": "30"}, {"ok": False, "error": "ratelimited"})]
    payload = payload_for(person("user:default/alice.rossi", "alice.rossi@example.com"), owners=False)
    with TestClient(create_app(slack_rt)) as client:
        post(client, payload)
        run_worker(slack_rt)
        record = deliveries(client, payload)["alice.rossi@example.com"]
        assert record["state"] == "retrying" and record["attempts"] == 1
        assert "429" in record["lastError"] and f"{method} answered ratelimited" in record["lastError"]

        [when] = scheduled(slack_rt)
        assert len(slack.answered_at[method]) == 1
        # The test config's backoff is 1 s: Slack's 30 s wins, and the retry never comes early (the runtime's
        # clock stands still: the 429 was answered at its time).
        assert slack_rt.clock() + 30 <= when <= slack_rt.clock() + 31
        assert run_scheduled(slack_rt, due_only=True) == 0

        assert run_scheduled(slack_rt) == 1  # as if the 30 s had passed
        run_worker(slack_rt)
        record = deliveries(client, payload)["alice.rossi@example.com"]
    assert record["state"] == "delivered" and record["attempts"] == 2
    # Each try looks Alice up and (unless the look-up was refused) posts: one DM reached her.
    assert len(slack.of("users.lookupByEmail")) == 2
    posts = [body["channel"] for _, _, body in slack.of("chat.postMessage")]
    assert posts == ["U0ALICE"] * (2 if method == "chat.postMessage" else 1)


def test_with_templates_owners_get_block_kit_in_their_channel_and_requesters_a_dm(
    make_slack_rt: Callable[..., Runtime], slack: FakeSlack
) -> None:
    slack_rt = make_slack_rt(templates={"dir": "unused", "builtin": True})  # markdown: Slack's Block Kit
    payload = payload_for(person("user:default/alice.rossi", "alice.rossi@example.com"))
    with TestClient(create_app(slack_rt)) as client:
        post(client, payload)
        run_worker(slack_rt)
        records = deliveries(client, payload)
    assert {k: r["state"] for k, r in records.items()} == {
        "owners-slack": "delivered",
        "alice.rossi@example.com": "delivered",
    }
    posts = {body["channel"]: body for _, _, body in slack.of("chat.postMessage")}
    assert sorted(posts) == ["#data-owners", "U0ALICE"]  # the owners' channel, not Slack's default
    for body in posts.values():
        assert body["attachments"][0]["blocks"][0]["type"] == "header"
