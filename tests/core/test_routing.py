"""relay.core.routing: which routes a message takes and the deliveries (skipped ones included) it needs."""

from __future__ import annotations

from typing import Any

import pytest

from relay.config import Config, RouteConfig
from relay.core.model import Delivery, Notification, State
from relay.core.rendering import recipient_of
from relay.core.routing import plan_notification, route_matches, route_message

pytestmark = pytest.mark.dated

KIND = "notification:access-control-request-failed"
OWNER = "recipient-type:system-owner"
REQUESTER = "recipient-type:access-control-requester"
MANAGER = "recipient-type:project-data-access-manager"

CHANNELS: dict[str, dict[str, Any]] = {
    "slack": {"url": "slack://TTTT/BBBB/CCCC"},
    "teams": {"url": "workflows://host.example.com:443/wf/sig"},
    "hook": {"url": "json://hooks.example.com/in"},
    "email": {"url": "mailtos://u:p@smtp.example.com?from=relay@example.com", "per_recipient": True},
    "email2": {"url": "mailto://smtp.example.com?from=relay@example.com", "per_recipient": True},
}


def config(*routes: dict[str, Any], default: list[str] | None = None) -> Config:
    return Config.model_validate({"channels": CHANNELS, "routes": list(routes), "default": {"channels": default or []}})


def route(**fields: Any) -> dict[str, Any]:
    return fields


def recipient(email: Any = "missing", ref: Any = "user:default/someone", shape: str = "flat") -> dict[str, Any]:
    r: dict[str, Any] = {"userRef": ref, "kind": "User"}
    if email == "missing":
        return r
    if shape == "flat":
        r["spec.email"] = email
    elif shape == "nested":
        r["spec"] = {"email": email}
    elif shape == "profile":
        r["spec"] = {"profile": {"email": email}}
    else:
        raise AssertionError(shape)
    return r


def message(legacy: Any = OWNER, v2: Any = "same", recipients: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {"recipientType": legacy, "title": "T", "message": "M", "recipients": recipients or []}
    if v2 == "same":
        m["recipientType_v2"] = legacy
    elif v2 != "absent":
        m["recipientType_v2"] = v2
    return m


def notification(*messages: dict[str, Any], kind: str = KIND) -> Notification:
    return Notification.model_validate(
        {
            "kind": kind,
            "sender": "platform",
            "body": {},
            "messages": list(messages),
            "metadata": {"eventId": "evt-1", "createdAt": "2026-11-20T09:14:05Z"},
        }
    )


AT = 1_763_630_045.0  # when the notification is planned


def plan(cfg: Config, *messages: dict[str, Any], kind: str = KIND) -> list[Delivery]:
    return plan_notification(cfg, notification(*messages, kind=kind), "evt-1", AT)


def msg_model(legacy: Any = OWNER, v2: Any = "same") -> Any:
    return notification(message(legacy, v2)).messages[0]


# --- route_matches: globs with and without prefixes ----------------------------------------------


@pytest.mark.parametrize(
    ("kinds", "recipient_types", "kind", "rtype", "expected"),
    [
        (["*"], ["*"], KIND, OWNER, True),
        (["notification:access-control-*"], ["*"], KIND, OWNER, True),
        (["access-control-*"], ["*"], KIND, OWNER, True),
        (["access-control-request-failed"], ["*"], KIND, OWNER, True),
        (["notification:access-control-request-failed"], ["*"], KIND, OWNER, True),
        (["notification:other-*"], ["*"], KIND, OWNER, False),
        (["other-*"], ["*"], KIND, OWNER, False),
        (["other", "access-*"], ["*"], KIND, OWNER, True),
        ([], ["*"], KIND, OWNER, False),
        # Globs are case-sensitive.
        (["ACCESS-CONTROL-*"], ["*"], KIND, OWNER, False),
        (["*"], ["recipient-type:system-owner"], KIND, OWNER, True),
        (["*"], ["system-owner"], KIND, OWNER, True),
        (["*"], ["system-*"], KIND, OWNER, True),
        (["*"], ["recipient-type:system-*"], KIND, OWNER, True),
        (["*"], ["system-owner"], KIND, REQUESTER, False),
        (["*"], ["recipient-type:project-*"], KIND, OWNER, False),
        (["*"], ["owner"], KIND, OWNER, False),
        (["*"], [], KIND, OWNER, False),
        (["*"], ["requester", "system-owner"], KIND, OWNER, True),
        # Both conditions must hold.
        (["access-*"], ["access-control-requester"], KIND, OWNER, False),
        (["other-*"], ["system-owner"], KIND, OWNER, False),
        # No recipient type at all: only a route for every type takes it.
        (["*"], ["*"], KIND, None, True),
        (["*"], ["system-owner"], KIND, None, False),
        (["*"], ["recipient-type:*"], KIND, None, False),
        # A kind without the prefix still matches globs of either form.
        (["custom-kind"], ["*"], "custom-kind", OWNER, True),
        (["notification:custom-kind"], ["*"], "custom-kind", OWNER, False),
    ],
)
def test_route_matches(
    kinds: list[str], recipient_types: list[str], kind: str, rtype: str | None, expected: bool
) -> None:
    r = RouteConfig.model_validate({"kinds": kinds, "recipient_types": recipient_types})
    assert route_matches(r, kind, rtype) is expected


def test_route_defaults_match_everything() -> None:
    r = RouteConfig()
    assert route_matches(r, "notification:anything", "recipient-type:anyone")
    assert route_matches(r, "notification:anything", None)


# --- route_message: recipient type resolution ----------------------------------------------------

OWNER_AND_REQUESTER = (
    route(recipient_types=["system-owner"], channels=["slack"]),
    route(recipient_types=["recipient-type:access-control-requester"], channels=["email"]),
)
ALL_THREE = (
    route(recipient_types=["project-data-access-manager"], channels=["teams"]),
    *OWNER_AND_REQUESTER,
)


@pytest.mark.parametrize(
    ("routes", "legacy", "v2", "expected_type", "expected_channels", "is_default"),
    [
        # v2 present, non-null and routed: it wins over the legacy type.
        (ALL_THREE, OWNER, MANAGER, MANAGER, ["teams"], False),
        # v2 equal to legacy.
        (ALL_THREE, OWNER, OWNER, OWNER, ["slack"], False),
        # v2 null / missing / empty: legacy.
        (ALL_THREE, OWNER, None, OWNER, ["slack"], False),
        (ALL_THREE, OWNER, "absent", OWNER, ["slack"], False),
        (ALL_THREE, OWNER, "", OWNER, ["slack"], False),
        # v2 present but no rule names it: the legacy type's rules.
        (OWNER_AND_REQUESTER, OWNER, MANAGER, OWNER, ["slack"], False),
        # Neither routed: the default route, recorded under the v2 name.
        (OWNER_AND_REQUESTER, "recipient-type:x", "recipient-type:y", "recipient-type:y", ["hook"], True),
        (OWNER_AND_REQUESTER, "recipient-type:x", None, "recipient-type:x", ["hook"], True),
        (OWNER_AND_REQUESTER, None, None, None, ["hook"], True),
        ((), OWNER, MANAGER, MANAGER, ["hook"], True),
        # Only v2 given, routed.
        (ALL_THREE, None, MANAGER, MANAGER, ["teams"], False),
        # Only legacy null and v2 unrouted: default.
        (OWNER_AND_REQUESTER, None, MANAGER, MANAGER, ["hook"], True),
    ],
)
def test_route_message_resolves_recipient_type(
    routes: tuple[dict[str, Any], ...],
    legacy: Any,
    v2: Any,
    expected_type: str | None,
    expected_channels: list[str],
    is_default: bool,
) -> None:
    cfg = config(*routes, default=["hook"])
    routing = route_message(cfg, KIND, msg_model(legacy, v2))
    assert routing.recipient_type == expected_type
    assert (routing.indexes == (None,)) is is_default  # the default route
    assert [c for r in routing.routes for c in r.channels] == expected_channels


def test_v2_routed_only_for_another_kind_falls_back_to_legacy() -> None:
    cfg = config(
        route(kinds=["other-kind"], recipient_types=["project-data-access-manager"], channels=["teams"]),
        route(recipient_types=["system-owner"], channels=["slack"]),
    )
    routing = route_message(cfg, KIND, msg_model(OWNER, MANAGER))
    assert routing.recipient_type == OWNER
    assert [c for r in routing.routes for c in r.channels] == ["slack"]
    # ... while for that other kind the v2 type wins.
    routing = route_message(cfg, "notification:other-kind", msg_model(OWNER, MANAGER))
    assert routing.recipient_type == MANAGER
    assert [c for r in routing.routes for c in r.channels] == ["teams"]


def test_catch_all_route_routes_v2() -> None:
    cfg = config(route(channels=["hook"]), route(recipient_types=["system-owner"], channels=["slack"]))
    routing = route_message(cfg, KIND, msg_model(OWNER, MANAGER))
    assert routing.recipient_type == MANAGER
    assert [c for r in routing.routes for c in r.channels] == ["hook"]


@pytest.mark.parametrize(
    ("routes", "expected"),
    [
        # First match wins.
        ((route(channels=["slack"]), route(channels=["teams"])), ["slack"]),
        ((route(kinds=["nope"], channels=["slack"]), route(channels=["teams"])), ["teams"]),
        # continue: later matching routes are collected too.
        ((route(channels=["slack"], **{"continue": True}), route(channels=["teams"])), ["slack", "teams"]),
        (
            (
                route(channels=["slack"], **{"continue": True}),
                route(kinds=["nope"], channels=["email"]),
                route(channels=["teams"]),
                route(channels=["hook"]),
            ),
            ["slack", "teams"],
        ),
        (
            (
                route(channels=["slack"], **{"continue": True}),
                route(channels=["teams"], **{"continue": True}),
                route(channels=["hook"]),
            ),
            ["slack", "teams", "hook"],
        ),
        # continue on the last matching route: nothing more to collect.
        ((route(channels=["slack"], **{"continue": True}),), ["slack"]),
        # A non-matching route's continue flag does not matter.
        (
            (route(kinds=["nope"], channels=["email"]), route(channels=["slack"]), route(channels=["teams"])),
            ["slack"],
        ),
    ],
)
def test_first_match_wins_unless_continue(routes: tuple[dict[str, Any], ...], expected: list[str]) -> None:
    cfg = config(*routes, default=["email2"])
    routing = route_message(cfg, KIND, msg_model())
    assert None not in routing.indexes  # not the default route
    assert [c for r in routing.routes for c in r.channels] == expected
    deliveries = plan(cfg, message())
    assert [d.channel for d in deliveries] == [c for c in expected if not CHANNELS[c].get("per_recipient")]


# --- plan_notification: audiences and recipients -------------------------------------------------


def test_no_duplicate_channel_per_message_across_continue_routes() -> None:
    cfg = config(
        route(channels=["slack", "email"], **{"continue": True}),
        route(channels=["email", "slack", "teams"]),
    )
    deliveries = plan(cfg, message(recipients=[recipient("a@x.com"), recipient("b@x.com")]))
    assert [(d.channel, d.address) for d in deliveries] == [
        ("slack", None),
        ("email", "a@x.com"),
        ("email", "b@x.com"),
        ("teams", None),
    ]


def test_same_channel_twice_in_one_route_is_planned_once() -> None:
    cfg = config(route(channels=["slack", "slack"]))
    assert [d.channel for d in plan(cfg, message())] == ["slack"]


def test_same_channel_in_different_messages_is_planned_per_message() -> None:
    cfg = config(route(channels=["slack"]))
    deliveries = plan(cfg, message(OWNER), message(REQUESTER), message(MANAGER))
    assert [(d.messageIndex, d.channel) for d in deliveries] == [(0, "slack"), (1, "slack"), (2, "slack")]


@pytest.mark.parametrize("count", [0, 1, 2, 5])
def test_non_per_recipient_channel_is_the_audience(count: int) -> None:
    cfg = config(route(channels=["slack", "teams", "hook"]))
    recipients = [recipient(f"u{i}@x.com") for i in range(count)]
    deliveries = plan(cfg, message(recipients=recipients))
    assert [d.channel for d in deliveries] == ["slack", "teams", "hook"]
    for d in deliveries:
        assert d.recipient is None
        assert d.address is None
        assert d.recipientIndex is None
        assert d.lastError is None


def test_zero_recipients_per_recipient_channel_plans_nothing() -> None:
    cfg = config(route(channels=["email", "slack"]))
    deliveries = plan(cfg, message(recipients=[]))
    assert [d.channel for d in deliveries] == ["slack"]


@pytest.mark.parametrize(
    ("rcpt", "address"),
    [
        (recipient("flat@x.com", shape="flat"), "flat@x.com"),
        (recipient("nested@x.com", shape="nested"), "nested@x.com"),
        (recipient("profile@x.com", shape="profile"), "profile@x.com"),
        ({"userRef": "user:default/p", "spec.profile.email": "pf@x.com"}, "pf@x.com"),
        ({"userRef": "user:default/e", "email": "plain@x.com"}, "plain@x.com"),
        ({"spec.email": None, "spec": {"email": "n@x.com"}}, "n@x.com"),
        (recipient("  padded@x.com  "), "padded@x.com"),
        (recipient("first.last+tag@sub.example.co.uk"), "first.last+tag@sub.example.co.uk"),
    ],
)
def test_per_recipient_reads_every_email_shape(rcpt: dict[str, Any], address: str) -> None:
    cfg = config(route(channels=["email"]))
    n = notification(message(recipients=[rcpt]))
    [d] = plan_notification(cfg, n, "evt-1", AT)
    assert d.channel == "email"
    assert d.address == address
    assert d.lastError is None
    assert recipient_of(n, d) == rcpt
    assert d.recipientIndex == 0


@pytest.mark.parametrize(
    ("rcpt", "reason_part"),
    [
        (recipient(None), "no e-mail address"),
        (recipient(), "no e-mail address"),
        (recipient(""), "no e-mail address"),
        (recipient("   "), "no e-mail address"),
        (recipient(12345), "no e-mail address"),
        (recipient(None, shape="nested"), "no e-mail address"),
        ({"userRef": None, "metadata.name": None, "spec.email": None, "kind": None}, "no e-mail address"),
        ({}, "no e-mail address"),
        (recipient("a@b"), "not valid: 'a@b'"),
        (recipient("x@y.com?to=evil@z.com"), "not valid"),
        (recipient("a@b.com,c@d.com"), "not valid"),
        (recipient("mailto:a@b.com"), "not valid"),
        (recipient("a b@c.com"), "not valid"),
        (recipient("a@b.com/x"), "not valid"),
        (recipient("a@b.com&bcc=evil@z.com", shape="nested"), "not valid"),
        (recipient("a@b.com\r\nBcc: evil@z.com", shape="profile"), "not valid"),
    ],
)
def test_recipient_without_usable_address_is_skipped_with_reason(rcpt: dict[str, Any], reason_part: str) -> None:
    cfg = config(route(channels=["email", "slack"]))
    n = notification(message(recipients=[rcpt]))
    deliveries = plan_notification(cfg, n, "evt-1", AT)
    assert [d.channel for d in deliveries] == ["email", "slack"]
    skipped, audience = deliveries
    assert skipped.lastError is not None
    assert skipped.state is State.SKIPPED
    assert reason_part in skipped.lastError
    assert skipped.address is None
    assert recipient_of(n, skipped) == rcpt
    assert skipped.recipientIndex == 0
    # The rest of the notification still goes out.
    assert audience.lastError is None


def test_long_invalid_address_is_shortened_in_the_reason() -> None:
    cfg = config(route(channels=["email"]))
    [d] = plan(cfg, message(recipients=[recipient("x" * 300)]))
    assert d.lastError is not None
    assert len(d.lastError) < 150
    assert "..." in d.lastError


@pytest.mark.parametrize(
    ("rcpt", "ref"),
    [
        (recipient("anon@x.com", ref=None), None),
        ({"userRef": None, "metadata.name": "anon", "spec.email": "anon@x.com"}, "anon"),
        ({"userRef": None, "metadata": {"name": "anon"}, "spec": {"email": "anon@x.com"}}, "anon"),
        (recipient("known@x.com", ref="user:default/known"), "user:default/known"),
    ],
)
def test_null_user_ref_with_valid_email_is_deliverable(rcpt: dict[str, Any], ref: str | None) -> None:
    cfg = config(route(channels=["email"]))
    [d] = plan(cfg, message(recipients=[rcpt]))
    assert d.lastError is None
    assert d.address is not None
    assert d.recipient == (ref or d.address)  # a recipient with no reference is recorded by its address


@pytest.mark.parametrize(
    ("emails", "expected"),
    [
        (["a@x.com", "a@x.com"], ["a@x.com"]),
        (["a@x.com", "A@X.COM"], ["a@x.com"]),
        (["a@x.com", "b@x.com", "a@x.com", "c@x.com", "b@x.com"], ["a@x.com", "b@x.com", "c@x.com"]),
        (["a@x.com", " a@x.com "], ["a@x.com"]),
    ],
)
def test_duplicate_addresses_in_one_message_get_one_delivery(emails: list[str], expected: list[str]) -> None:
    cfg = config(route(channels=["email"]))
    deliveries = plan(cfg, message(recipients=[recipient(e) for e in emails]))
    assert [d.address for d in deliveries] == expected
    assert all(d.lastError is None for d in deliveries)


def test_same_address_in_two_messages_is_planned_in_each() -> None:
    cfg = config(route(channels=["email"]))
    deliveries = plan(cfg, message(recipients=[recipient("a@x.com")]), message(recipients=[recipient("a@x.com")]))
    assert [(d.messageIndex, d.address) for d in deliveries] == [(0, "a@x.com"), (1, "a@x.com")]


def test_same_address_on_two_per_recipient_channels_is_planned_on_each() -> None:
    cfg = config(route(channels=["email", "email2"]))
    deliveries = plan(cfg, message(recipients=[recipient("a@x.com")]))
    assert [(d.channel, d.address) for d in deliveries] == [("email", "a@x.com"), ("email2", "a@x.com")]


def test_every_skipped_recipient_is_recorded() -> None:
    cfg = config(route(channels=["email"]))
    deliveries = plan(cfg, message(recipients=[recipient(None), recipient(None), recipient("bad")]))
    assert [d.recipientIndex for d in deliveries] == [0, 1, 2]
    assert all(d.lastError for d in deliveries)


def test_mixed_recipients_keep_payload_order_and_indexes() -> None:
    cfg = config(route(channels=["email"]))
    rcpts = [
        recipient("one@x.com"),
        recipient(None),
        recipient("two@x.com", shape="nested"),
        recipient("one@x.com"),
        recipient("a@b"),
        recipient("three@x.com", ref=None, shape="profile"),
    ]
    deliveries = plan(cfg, message(recipients=rcpts))
    assert [(d.recipientIndex, d.address, d.lastError is None) for d in deliveries] == [
        (0, "one@x.com", True),
        (1, None, False),
        (2, "two@x.com", True),
        (4, None, False),
        (5, "three@x.com", True),
    ]


def test_planned_delivery_carries_route_settings() -> None:
    cfg = config(
        route(recipient_types=["system-owner"], channels=["slack"], template="custom/owner", fallback=["hook"])
    )
    [d] = plan(cfg, message(OWNER, MANAGER))
    assert d.messageIndex == 0
    assert d.recipientType == OWNER
    assert d.template == "custom/owner"
    assert d.fallback == ["hook"]


def test_default_route_settings_are_used() -> None:
    cfg = Config.model_validate(
        {
            "channels": CHANNELS,
            "routes": [{"recipient_types": ["nobody"], "channels": ["slack"]}],
            "default": {"channels": ["hook", "email"], "template": "platform", "fallback": ["teams"]},
        }
    )
    deliveries = plan(cfg, message(OWNER, recipients=[recipient("a@x.com")]))
    assert [(d.channel, d.template, d.fallback, d.address) for d in deliveries] == [
        ("hook", "platform", ["teams"], None),
        ("email", "platform", ["teams"], "a@x.com"),
    ]


def test_default_route_without_channels_plans_nothing() -> None:
    cfg = config(route(recipient_types=["nobody"], channels=["slack"]))
    assert plan(cfg, message(OWNER, recipients=[recipient("a@x.com")])) == []


def test_no_messages_plans_nothing() -> None:
    assert plan(config(route(channels=["slack"]))) == []


def test_unknown_kind_takes_catch_all_routes() -> None:
    cfg = config(route(kinds=["access-control-*"], channels=["slack"]), route(channels=["hook"]))
    deliveries = plan(cfg, message(), kind="notification:brand-new-kind")
    assert [d.channel for d in deliveries] == ["hook"]


def test_platform_sample_shape() -> None:
    """The platform's sample: owner, requester, and a v2-only type whose recipients have no e-mail."""
    cfg = config(
        route(
            kinds=["notification:access-control-*"], recipient_types=["recipient-type:system-owner"], channels=["slack"]
        ),
        route(recipient_types=["recipient-type:project-data-access-manager"], channels=["email"]),
        route(recipient_types=["recipient-type:access-control-requester"], channels=["email"]),
        default=["hook"],
    )
    deliveries = plan(
        cfg,
        message(OWNER, OWNER, [recipient("bruno.verdi@example.com", "user:default/bruno.verdi")]),
        message(REQUESTER, REQUESTER, [recipient("alice.rossi@example.com", "user:default/alice.rossi")]),
        message(
            OWNER,
            MANAGER,
            [
                recipient(None, "user:default/carla.neri"),
                {"userRef": None, "metadata.name": None, "spec.email": None, "kind": None},
            ],
        ),
    )
    summary = [
        (d.messageIndex, d.recipientType, d.channel, d.address, d.recipient, d.lastError is not None)
        for d in deliveries
    ]
    assert summary == [
        (0, OWNER, "slack", None, None, False),
        (1, REQUESTER, "email", "alice.rossi@example.com", "user:default/alice.rossi", False),
        (2, MANAGER, "email", None, "user:default/carla.neri", True),
        (2, MANAGER, "email", None, None, True),
    ]


def test_plan_is_deterministic() -> None:
    cfg = config(route(channels=["slack", "email"], **{"continue": True}), route(channels=["teams"]))
    msgs = [message(recipients=[recipient(f"u{i}@x.com") for i in range(4)]), message(REQUESTER)]
    assert plan(cfg, *msgs) == plan(cfg, *msgs)
