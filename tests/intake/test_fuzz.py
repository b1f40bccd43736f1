"""Fuzzing the webhook: valid, near-valid and garbage payloads never get a 5xx, and every answer keeps the contract.

For every answer: no 5xx; a 4xx carries the platform's error body; a 202 means the notification is in
Redis, and a worker can read it back and plan it. Cases are derandomized (the same in every CI run) and
bounded (tests/conftest.py `fuzz`); RELAY_FUZZ_SCALE=10 runs ten times as many.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from starlette.testclient import TestClient

from relay.core.model import Notification
from relay.core.routing import plan_notification
from relay.runtime.bootstrap import Runtime
from relay.web.throttle import KEY_PREFIX
from tests.conftest import WEBHOOK_TOKEN, fuzz, sample_notification
from tests.intake.test_http import assert_error_body

AUTH = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}


# -- strategies ----------------------------------------------------------------------------------

leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_value = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=6,
)
RECIPIENT_TYPES = [
    "recipient-type:system-owner",
    "recipient-type:access-control-requester",
    "recipient-type:project-data-access-manager",
]
recipient_type = st.sampled_from(RECIPIENT_TYPES) | st.none() | st.text(max_size=30)
# Hypothesis' own e-mail strategy is slow; these cover valid, odd and hostile addresses.
email = st.sampled_from(
    ["a@example.com", "A.B+tag@sub.example.org", "x@y", "no-at-sign", "a@b.com?to=evil@x.com", "a@b.com, c@d.com"]
)
recipient = st.dictionaries(
    st.sampled_from(["userRef", "metadata.name", "spec.email", "kind"]) | st.text(max_size=8),
    leaf | email | st.fixed_dictionaries({"email": email | st.none()}),
    max_size=4,
)
message = st.fixed_dictionaries(
    {"recipients": st.lists(recipient, max_size=3)},
    optional={
        "recipientType": recipient_type,
        "recipientType_v2": recipient_type,
        "title": st.text(max_size=60) | st.none(),
        "message": st.text(max_size=200) | st.none(),
        "priority": json_value,
    },
)
event_id = st.uuids().map(str) | st.text(min_size=1, max_size=80).filter(str.strip)
notification = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["notification:access-control-request-failed", "notification:other"])
        | st.text(min_size=1, max_size=40),
        "sender": st.text(max_size=20),
        "body": st.dictionaries(st.text(max_size=12), json_value, max_size=4),
        "messages": st.lists(message, max_size=3),
        "metadata": st.fixed_dictionaries({"eventId": event_id}, optional={"createdAt": st.text(max_size=30)}),
    },
    optional={"newTopLevelField": json_value},
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, (*prefix, index))


def _deep(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


MUTATIONS: dict[str, Any] = {
    "delete": None,
    "null": st.none(),
    "other_value": json_value,
    "wrong_type": st.sampled_from([0, 1.5, True, "text", [], {}, [1, "a"], {"a": None}]),
    # Just under and over the limits (kind 256, eventId 512, depth 32, 100 messages, 1000 recipients).
    "long_string": st.sampled_from([256, 257, 513, 5000]).map(lambda n: "x" * n),
    "deep": st.sampled_from([28, 31, 40]).map(_deep),
    "many": st.sampled_from([100, 101, 1001]),
    "unicode": st.text(st.characters(codec="utf-8"), max_size=30),
}


@st.composite
def near_valid(draw: st.DrawFn) -> dict[str, Any]:
    """A valid notification with one part broken: gone, null, mistyped, huge, deep or repeated."""
    payload: dict[str, Any] = draw(notification)
    path = draw(st.sampled_from(list(_paths(payload))[1:]))
    op = draw(st.sampled_from(sorted(MUTATIONS)))
    parent: Any = payload
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if op == "delete":
        parent.pop(last)
    elif op == "many":
        parent[last] = [parent[last]] * draw(MUTATIONS["many"])
    else:
        parent[last] = draw(MUTATIONS[op])
    return payload


TOKENS = ["\\ud800", "\\udfff", "NaN", "Infinity", "1e99999", "1" * 5000, '"', "\\", "{", "}", "[", "]", ",", ":"]
TOKENS += ["\x00", "\ufeff", "\u2028", "null", "-", "0.", "\\u00", "\n", " " * 50]


def _bases() -> list[str]:
    sample = sample_notification()
    sample["metadata"]["eventId"] = "spliced"
    minimal = {"kind": "k", "sender": "s", "body": {}, "messages": [{}], "metadata": {"eventId": "spliced-min"}}
    unicode = dict(sample, body={"text": "ünïcødé ✓ 😀 \u2028", "n": [1.5e300, -0, 2**64]})
    return [json.dumps(v, ensure_ascii=a) for v in (sample, minimal, unicode) for a in (True, False)]


BASES = _bases()


@st.composite
def spliced(draw: st.DrawFn) -> bytes:
    """Valid JSON text with raw tokens spliced in: escapes, constants and numbers parsers disagree on."""
    # Fixed bases keep generation cheap: the variety is in where the tokens land.
    text = draw(st.sampled_from(BASES))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 3))
        text = text[:at] + draw(st.sampled_from(TOKENS)) + text[at + cut :]
    return text.encode("utf-8", "surrogatepass")


content_type = st.sampled_from(
    ["application/json", "application/json; charset=utf-8", "application/cloudevents+json", "text/plain", "", "*/*"]
)
credentials = st.sampled_from(
    [
        AUTH,
        {"X-Relay-Token": WEBHOOK_TOKEN},
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic !!!"},
        {"Authorization": "Bearer"},
    ]
) | st.fixed_dictionaries({"Authorization": st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=60)})


# -- the properties --------------------------------------------------------------------------------


def check(answer: Any, rt: Runtime) -> None:
    status = answer.status_code
    assert status < 500, answer.text
    if status != 202:
        assert 400 <= status < 500, status
        assert_error_body(answer, status)
        return
    body = answer.json()
    assert body["status"] in ("accepted", "duplicate")
    stored = rt.store.event(body["eventId"])
    assert stored is not None, "a 202 whose notification is not in Redis"
    # What a worker does first: read it back and plan its deliveries.
    plan_notification(rt.config, Notification.model_validate_json(stored.payload), stored.eventId, stored.receivedAt)


def forget_refused_credentials(rt: Runtime) -> None:
    """Each example starts with a clean slate: else the 11th wrong token would be answered 429 before the
    body is looked at, and the examples after it would test nothing (tests/intake/test_throttle.py)."""
    for key in rt.redis.scan_iter(KEY_PREFIX + "*"):
        rt.redis.delete(key)


def send(client: TestClient, raw: bytes, headers: dict[str, str] | None = None, kind: str = "application/json") -> Any:
    return client.post("/webhook", content=raw, headers={**AUTH, "Content-Type": kind, **(headers or {})})


@fuzz(100)
@given(payload=notification)
def test_valid_notifications_are_accepted_and_stored(client: TestClient, rt: Runtime, payload: dict[str, Any]) -> None:
    answer = send(client, json.dumps(payload).encode())
    assert answer.status_code == 202, answer.text
    assert answer.json()["eventId"] == payload["metadata"]["eventId"]
    check(answer, rt)


@fuzz(200)
@given(payload=near_valid())
def test_near_valid_notifications_never_break_relay(client: TestClient, rt: Runtime, payload: dict[str, Any]) -> None:
    check(send(client, json.dumps(payload).encode()), rt)


@fuzz(200)
@given(raw=spliced())
def test_spliced_json_never_breaks_relay(client: TestClient, rt: Runtime, raw: bytes) -> None:
    check(send(client, raw), rt)


@fuzz(200)
@given(
    raw=st.binary(max_size=3000) | json_value.map(lambda v: json.dumps(v).encode()),
    kind=content_type,
    headers=credentials,
)
def test_garbage_never_breaks_relay(
    client: TestClient, rt: Runtime, raw: bytes, kind: str, headers: dict[str, str]
) -> None:
    forget_refused_credentials(rt)
    answer = client.post("/webhook", content=raw, headers={"Content-Type": kind, **headers})
    check(answer, rt)


@fuzz(60)
@given(payload=notification, headers=credentials, kind=content_type)
def test_credentials_and_content_types_are_checked_on_good_payloads(
    client: TestClient, rt: Runtime, payload: dict[str, Any], headers: dict[str, str], kind: str
) -> None:
    forget_refused_credentials(rt)
    answer = client.post("/webhook", content=json.dumps(payload).encode(), headers={"Content-Type": kind, **headers})
    check(answer, rt)
    authorized = headers in (AUTH, {"X-Relay-Token": WEBHOOK_TOKEN})
    if not authorized:
        assert answer.status_code == 401


def test_the_sample_survives_every_single_mutation(client: TestClient, rt: Runtime) -> None:
    """Exhaustive, not random: each part of the sample deleted, nulled and mistyped in turn."""
    base = sample_notification()
    count = 0
    for path in list(_paths(base))[1:]:
        replacements: tuple[Any, ...] = (None, 0, "x", [], {}, "delete")
        for replacement in replacements:
            payload = json.loads(json.dumps(base))
            parent = payload
            for step in path[:-1]:
                parent = parent[step]
            if replacement == "delete":
                parent.pop(path[-1])
            else:
                parent[path[-1]] = replacement
            if isinstance(payload.get("metadata"), dict) and payload["metadata"].get("eventId"):
                payload["metadata"]["eventId"] = f"mutation-{count}"
            check(send(client, json.dumps(payload).encode()), rt)
            count += 1
    assert count > 300


def test_prefixes_of_a_valid_body_are_refused_cleanly(client: TestClient, rt: Runtime) -> None:
    raw = json.dumps(sample_notification()).encode()
    for end in range(0, len(raw), 7):
        answer = send(client, raw[:end])
        assert answer.status_code == 400
        check(answer, rt)
