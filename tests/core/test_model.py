"""relay.core.model: the platform's payload (open to new fields, strict where it matters) and delivery types."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest
from pydantic import ValidationError

from relay.core.model import (
    MAX_EVENT_ID_LENGTH,
    Delivery,
    Notification,
    State,
    iso,
    kind_name,
    recipient_type_name,
)

pytestmark = pytest.mark.dated


def recipient(email: Any = "bruno.verdi@example.com", ref: Any = "user:default/bruno.verdi") -> dict[str, Any]:
    return {"userRef": ref, "metadata.name": "bruno.verdi", "spec.email": email, "kind": "User"}


def message(**overrides: Any) -> dict[str, Any]:
    m: dict[str, Any] = {
        "recipientType": "recipient-type:system-owner",
        "recipientType_v2": "recipient-type:system-owner",
        "recipients": [recipient()],
        "title": "Access request failed",
        "message": "The access request failed.",
    }
    m.update(overrides)
    return m


def payload(**overrides: Any) -> dict[str, Any]:
    p: dict[str, Any] = {
        "kind": "notification:access-control-request-failed",
        "sender": "platform",
        "body": {"verb": "grant", "requester": {"userRef": "user:default/alice", "displayName": "Alice"}},
        "messages": [message()],
        "metadata": {"eventId": "6f1c2a9e-3b7d", "createdAt": "2026-11-20T09:14:05.002Z"},
    }
    p.update(overrides)
    return p


def without(data: dict[str, Any], dotted: str) -> dict[str, Any]:
    data = copy.deepcopy(data)
    node: Any = data
    *path, last = dotted.split(".")
    for part in path:
        node = node[int(part)] if isinstance(node, list) else node[part]
    del node[last]
    return data


def setting(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(data)
    node: Any = data
    *path, last = dotted.split(".")
    for part in path:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return data


def test_valid_payload() -> None:
    n = Notification.model_validate(payload())
    assert n.kind == "notification:access-control-request-failed"
    assert n.event_id == "6f1c2a9e-3b7d"
    assert n.metadata.createdAt == "2026-11-20T09:14:05.002Z"
    assert n.messages[0].recipients[0]["spec.email"] == "bruno.verdi@example.com"
    assert n.body["requester"]["displayName"] == "Alice"


@pytest.mark.parametrize(
    "where",
    ["", "metadata", "messages.0"],
)
def test_unknown_fields_are_accepted_and_kept(where: str) -> None:
    data = payload()
    target: Any = data
    for part in where.split(".") if where else []:
        target = target[int(part)] if isinstance(target, list) else target[part]
    target["futureField"] = {"nested": [1, 2, None]}
    dumped = Notification.model_validate(data).model_dump(mode="json")
    node: Any = dumped
    for part in where.split(".") if where else []:
        node = node[int(part)] if isinstance(node, list) else node[part]
    assert node["futureField"] == {"nested": [1, 2, None]}


def test_free_form_body_and_recipients_are_kept_verbatim() -> None:
    body = {"anything": {"deep": [{"x": None}]}, "displayFields": {"reason": "close"}, "n": 1.5}
    rcpt = {"userRef": None, "spec": {"profile": {"email": "p@x.com"}}, "custom.field": True}
    dumped = Notification.model_validate(payload(body=body, messages=[message(recipients=[rcpt])])).model_dump(
        mode="json"
    )
    assert dumped["body"] == body
    assert dumped["messages"][0]["recipients"] == [rcpt]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda p: without(p, "kind"), "kind"),
        (lambda p: without(p, "sender"), "sender"),
        (lambda p: without(p, "body"), "body"),
        (lambda p: without(p, "messages"), "messages"),
        (lambda p: without(p, "metadata"), "metadata"),
        (lambda p: without(p, "metadata.eventId"), "metadata.eventId"),
        (lambda p: setting(p, "kind", ""), "kind"),
        (lambda p: setting(p, "kind", 42), "kind"),
        (lambda p: setting(p, "kind", None), "kind"),
        (lambda p: setting(p, "sender", None), "sender"),
        (lambda p: setting(p, "sender", 1), "sender"),
        (lambda p: setting(p, "body", None), "body"),
        (lambda p: setting(p, "body", []), "body"),
        (lambda p: setting(p, "body", "text"), "body"),
        (lambda p: setting(p, "messages", None), "messages"),
        (lambda p: setting(p, "messages", {"0": message()}), "messages"),
        (lambda p: setting(p, "messages", ["not an object"]), "messages.0"),
        (lambda p: setting(p, "metadata", None), "metadata"),
        (lambda p: setting(p, "metadata.eventId", ""), "metadata.eventId"),
        (lambda p: setting(p, "metadata.eventId", "   "), "metadata.eventId"),
        (lambda p: setting(p, "metadata.eventId", 123), "metadata.eventId"),
        (lambda p: setting(p, "metadata.eventId", None), "metadata.eventId"),
        (lambda p: setting(p, "metadata.eventId", "e" * (MAX_EVENT_ID_LENGTH + 1)), "metadata.eventId"),
        (lambda p: setting(p, "metadata.createdAt", 1700000000), "metadata.createdAt"),
        (lambda p: setting(p, "messages.0.recipientType", 7), "messages.0.recipientType"),
        (lambda p: setting(p, "messages.0.recipientType_v2", ["x"]), "messages.0.recipientType_v2"),
        (lambda p: setting(p, "messages.0.recipients", "a@b.com"), "messages.0.recipients"),
        (lambda p: setting(p, "messages.0.recipients", ["a@b.com"]), "messages.0.recipients.0"),
        (lambda p: setting(p, "messages.0.title", 5), "messages.0.title"),
        (lambda p: setting(p, "messages.0.message", {"text": "x"}), "messages.0.message"),
    ],
)
def test_schema_violations(mutate: Any, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        Notification.model_validate(mutate(payload()))
    locs = {".".join(str(p) for p in e["loc"]) for e in err.value.errors()}
    assert any(loc == field or loc.startswith(field + ".") for loc in locs), locs


@pytest.mark.parametrize(
    ("mutate", "check"),
    [
        (lambda p: setting(p, "messages.0.recipientType", None), lambda n: n.messages[0].recipientType is None),
        (lambda p: setting(p, "messages.0.recipientType_v2", None), lambda n: n.messages[0].recipientType_v2 is None),
        (lambda p: without(p, "messages.0.recipientType_v2"), lambda n: n.messages[0].recipientType_v2 is None),
        (lambda p: without(p, "messages.0.recipientType"), lambda n: n.messages[0].recipientType is None),
        (lambda p: without(p, "messages.0.recipients"), lambda n: n.messages[0].recipients == []),
        (lambda p: setting(p, "messages.0.recipients", []), lambda n: n.messages[0].recipients == []),
        (lambda p: setting(p, "messages.0.recipients", None), lambda n: n.messages[0].recipients == []),
        (lambda p: setting(p, "messages.0.title", None), lambda n: n.messages[0].title is None),
        (lambda p: setting(p, "messages.0.message", None), lambda n: n.messages[0].message is None),
        (
            lambda p: setting(p, "messages.0.recipients", [recipient(None, None)]),
            lambda n: n.messages[0].recipients[0]["userRef"] is None,
        ),
        (lambda p: setting(p, "messages.0.recipients", [{}]), lambda n: n.messages[0].recipients == [{}]),
        (lambda p: setting(p, "metadata.createdAt", None), lambda n: n.metadata.createdAt is None),
        (lambda p: without(p, "metadata.createdAt"), lambda n: n.metadata.createdAt is None),
        (lambda p: setting(p, "messages", []), lambda n: n.messages == []),
        (lambda p: setting(p, "body", {}), lambda n: n.body == {}),
        (lambda p: setting(p, "kind", "notification:brand-new-kind"), lambda n: n.kind.endswith("brand-new-kind")),
        (
            lambda p: setting(p, "metadata.eventId", "e" * MAX_EVENT_ID_LENGTH),
            lambda n: len(n.event_id) == MAX_EVENT_ID_LENGTH,
        ),
        (lambda p: setting(p, "metadata.eventId", " padded "), lambda n: n.event_id == " padded "),
    ],
)
def test_nullable_and_optional_fields(mutate: Any, check: Any) -> None:
    assert check(Notification.model_validate(mutate(payload())))


def test_round_trip_through_json() -> None:
    n = Notification.model_validate(payload(extra={"k": 1}))
    again = Notification.model_validate_json(n.model_dump_json())
    assert again == n
    assert again.model_dump()["extra"] == {"k": 1}


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("notification:access-control-request-failed", "access-control-request-failed"),
        ("access-control-request-failed", "access-control-request-failed"),
        ("notification:", ""),
        ("notification:notification:x", "notification:x"),
        ("x-notification:y", "x-notification:y"),
        ("Notification:y", "Notification:y"),
    ],
)
def test_kind_name(kind: str, name: str) -> None:
    assert kind_name(kind) == name


@pytest.mark.parametrize(
    ("rtype", "name"),
    [
        ("recipient-type:system-owner", "system-owner"),
        ("recipient-type:project-data-access-manager", "project-data-access-manager"),
        ("system-owner", "system-owner"),
        ("role:recipient-type:x", "role:recipient-type:x"),
    ],
)
def test_recipient_type_name(rtype: str, name: str) -> None:
    assert recipient_type_name(rtype) == name


@pytest.mark.parametrize(
    ("state", "value"),
    [
        (State.QUEUED, "queued"),
        (State.RETRYING, "retrying"),
        (State.DELIVERED, "delivered"),
        (State.FAILED, "failed"),
        (State.SKIPPED, "skipped"),
    ],
)
def test_state_values(state: State, value: str) -> None:
    assert state.value == value
    assert state == value
    assert State(value) is state


def test_state_set_is_the_contract() -> None:
    # SPEC's states (`held`: quiet hours), and `expanded`: a group looked up in the catalog, whose members got
    # deliveries of their own.
    assert {s.value for s in State} == {"queued", "retrying", "delivered", "failed", "skipped", "expanded", "held"}


def planned(**fields: Any) -> Delivery:
    return Delivery("d1", "e1", "notification:k", 1, "slack", "auto", 3, 10.0, 10.0, "recipient-type:x", **fields)


def test_a_planned_delivery_defaults_and_copies() -> None:
    d = planned()
    assert (d.recipient, d.address, d.recipientIndex, d.lastError, d.fallback) == (None, None, None, None, [])
    assert (d.state, d.attempts, d.attemptTimes, d.notBefore, d.templateUsed) == (State.QUEUED, 0, [], None, None)
    assert dataclasses.replace(d, address="a@b.com") == planned(address="a@b.com")
    assert d != dataclasses.replace(d, address="a@b.com")
    # Updated in place as it is tried: no two deliveries share a list.
    assert d.attemptTimes is not planned().attemptTimes and d.fallback is not planned().fallback


def test_a_delivery_without_an_address_is_looked_up_unless_skipped() -> None:
    assert planned(recipientIndex=0).lookup
    assert not planned(recipientIndex=0, address="a@b.com").lookup
    assert not planned(recipientIndex=0, state=State.SKIPPED).lookup
    assert not planned().lookup  # an audience: nobody to look up


def test_the_api_shows_a_state_as_its_value() -> None:
    shown = planned(state=State.HELD, notBefore=0.5).public(with_event=True)
    assert json.loads(json.dumps(shown))["state"] == "held"
    assert (shown["notBefore"], shown["createdAt"], shown["eventId"]) == ("1970-01-01T00:00:00.500Z", iso(10.0), "e1")


def test_the_command_lines_state_choices_are_the_model_states() -> None:
    from relay.cli.inspect import STATES

    assert set(STATES) == {s.value for s in State}
