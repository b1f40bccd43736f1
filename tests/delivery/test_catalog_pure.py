"""Entity references, entity fields and catalog-aware planning (no I/O)."""

from __future__ import annotations

from typing import Any

import pytest

from relay.config import Config
from relay.core.model import Notification
from relay.core.recipients import catalog_ref
from relay.core.routing import plan_notification
from relay.delivery.catalog import EntityRef, entity_email, member_refs


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("user:default/jane.doe", ("user", "default", "jane.doe")),
        ("User:team-ns/jane", ("user", "team-ns", "jane")),
        ("group:data-managers", ("group", "default", "data-managers")),
        ("jane", None),
        ("user:", None),
        # a part that is a dot segment is refused; one with a slash is one encoded segment
        ("..:../secrets", None),
        ("user:default/..", None),
        ("user:./jane", None),
        ("user:../../api/jane", ("user", "../../api", "jane")),
    ],
)
def test_entity_refs(text: str, parsed: tuple[str, str, str] | None) -> None:
    ref = EntityRef.parse(text)
    assert (None if ref is None else (ref.kind, ref.namespace, ref.name)) == parsed


@pytest.mark.parametrize(
    ("entity", "email"),
    [
        ({"spec": {"profile": {"email": "a@example.com"}}}, "a@example.com"),
        ({"spec": {"email": "b@example.com"}}, "b@example.com"),
        ({"spec": {"profile": {"email": "not an address"}}}, None),
        ({"spec": {"profile": {"email": "x@y.com?to=evil@z.com"}}}, None),
        ({"spec": None}, None),
        ({}, None),
    ],
)
def test_entity_email(entity: dict[str, Any], email: str | None) -> None:
    assert entity_email(entity) == email


def test_group_members_from_relations_or_spec() -> None:
    relations = {
        "relations": [
            {"type": "hasMember", "targetRef": "user:default/a"},
            {"type": "memberOf", "targetRef": "group:default/x"},
            {"type": "hasMember", "targetRef": "user:default/b"},
        ]
    }
    assert member_refs(relations) == ["user:default/a", "user:default/b"]
    assert member_refs({"spec": {"members": ["c", "user:ns/d"]}}) == ["user:default/c", "user:ns/d"]


@pytest.mark.parametrize(
    ("recipient", "ref"),
    [
        ({"userRef": "user:default/a"}, "user:default/a"),
        ({"userRef": None, "metadata.name": "b", "kind": "User"}, "user:default/b"),
        ({"userRef": None, "metadata": {"name": "team"}, "kind": "Group"}, "group:default/team"),
        ({"userRef": None, "metadata.name": None}, None),
        ({"userRef": "user:"}, None),
    ],
)
def test_catalog_ref(recipient: dict[str, Any], ref: str | None) -> None:
    assert catalog_ref(recipient) == ref


def _plan(platform_url: str | None, recipients: list[dict[str, Any]]) -> list[Any]:
    config = Config.model_validate(
        {
            "platform": {"url": platform_url} if platform_url else {},
            "channels": {"mail": {"url": "mailto://127.0.0.1:25?from=r@example.com", "per_recipient": True}},
            "routes": [{"channels": ["mail"]}],
        }
    )
    notification = Notification.model_validate(
        {
            "kind": "notification:k",
            "sender": "platform",
            "body": {},
            "metadata": {"eventId": "e"},
            "messages": [{"recipientType": "recipient-type:x", "recipients": recipients, "title": "t", "message": "m"}],
        }
    )
    return plan_notification(config, notification, "e", 0.0)


def test_without_platform_a_missing_email_is_skipped_with_it_a_lookup_is_planned() -> None:
    recipients = [
        {"userRef": "user:default/a", "spec.email": None},
        {"userRef": None, "spec.email": None},
        {"userRef": "user:default/c", "spec.email": "c@example.com"},
    ]
    without = _plan(None, recipients)
    assert [(p.lastError is not None, p.lookup) for p in without] == [(True, False), (True, False), (False, False)]
    with_platform = _plan("https://platform.example.com", recipients)
    assert [(p.lastError is not None, p.lookup, p.recipient) for p in with_platform] == [
        (False, True, "user:default/a"),
        (True, False, None),
        (False, False, "user:default/c"),
    ]
