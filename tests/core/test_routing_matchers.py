"""Routes with `matchers:`: which route a message takes, the route each delivery names, and the config
errors a malformed matcher gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from relay.config import Config, ConfigError, load_config
from relay.core.model import Delivery, Notification, delivery_id
from relay.core.routing import plan_notification

KIND = "notification:access-control-request-failed"
OWNER = "recipient-type:system-owner"
MANAGER = "recipient-type:project-data-access-manager"
AT = 1_763_630_045.0  # when the notification is planned
CHANNELS = {
    "oncall": {"url": "json://oncall.example.com/in"},
    "finance": {"url": "json://finance.example.com/in"},
    "owners": {"url": "json://owners.example.com/in"},
    "managers": {"url": "json://managers.example.com/in"},
    "audit": {"url": "json://audit.example.com/in"},
}
PRODUCTION = 'body.requestedResource.environment="production"'
FINANCE = 'body.requestedResource.parentSystem.domain=~"finance|sales"'


def config(*routes: dict[str, Any], default: list[str] | None = None) -> Config:
    return Config.model_validate({"channels": CHANNELS, "routes": list(routes), "default": {"channels": default or []}})


def notification(environment: Any = "production", domain: Any = "finance", v2: str = OWNER) -> Notification:
    system: dict[str, Any] = {"name": "Invoices"}
    if domain is not None:
        system["domain"] = domain
    return Notification.model_validate(
        {
            "kind": KIND,
            "sender": "access-control",
            "body": {"requestedResource": {"environment": environment, "parentSystem": system}, "retries": 2},
            "messages": [{"recipientType": OWNER, "recipientType_v2": v2, "recipients": [], "title": "T"}],
            "metadata": {"eventId": "evt-1"},
        }
    )


def sent(cfg: Config, n: Notification) -> list[tuple[str, str | None]]:
    return [(d.channel, d.route) for d in plan_notification(cfg, n, n.event_id, AT)]


SPEC_ROUTES = (
    {
        "name": "production",
        "kinds": ["notification:access-control-*"],
        "matchers": [PRODUCTION],
        "channels": ["oncall"],
    },
    {"matchers": [FINANCE], "channels": ["finance"]},
)


@pytest.mark.parametrize(
    ("environment", "domain", "expected"),
    [
        ("production", "finance", [("oncall", "production")]),  # first match wins
        ("staging", "finance", [("finance", "routes[1]")]),
        ("staging", "sales", [("finance", "routes[1]")]),
        ("staging", "salesforce", [("audit", "default")]),  # the regex matches the whole value
        ("staging", None, [("audit", "default")]),  # absent reads as ""
        (None, "marketing", [("audit", "default")]),  # null reads as ""
        ({"name": "production"}, "hr", [("audit", "default")]),  # an object equals no string
    ],
)
def test_matchers_choose_the_route_and_each_delivery_names_it(
    environment: Any, domain: Any, expected: list[tuple[str, str]]
) -> None:
    cfg = config(*SPEC_ROUTES, default=["audit"])
    assert sent(cfg, notification(environment, domain)) == expected


def test_every_matcher_of_a_route_must_match() -> None:
    cfg = config({"matchers": [PRODUCTION, FINANCE], "channels": ["oncall"]}, default=["audit"])
    assert sent(cfg, notification("production", "finance")) == [("oncall", "routes[0]")]
    assert sent(cfg, notification("production", "hr")) == [("audit", "default")]
    assert sent(cfg, notification("staging", "finance")) == [("audit", "default")]


def test_one_entry_may_hold_several_matchers() -> None:
    cfg = config({"matchers": [f"{{{PRODUCTION}, {FINANCE}}}"], "channels": ["oncall"]}, default=["audit"])
    assert sent(cfg, notification("production", "finance")) == [("oncall", "routes[0]")]
    assert sent(cfg, notification("production", "hr")) == [("audit", "default")]


def test_continue_collects_every_matching_route_with_its_own_name() -> None:
    cfg = config(
        {"name": "prod", "matchers": [PRODUCTION], "channels": ["oncall"], "continue": True},
        {"name": "numbers", "matchers": ["body.retries=2", 'sender!~"test-.*"'], "channels": ["finance"]},
        {"channels": ["owners"]},
    )
    assert sent(cfg, notification("production")) == [("oncall", "prod"), ("finance", "numbers")]
    assert sent(cfg, notification("staging")) == [("finance", "numbers")]


def test_matchers_read_kind_sender_and_metadata() -> None:
    cfg = config(
        {"matchers": ['kind=~"notification:access-.*"', 'sender="access-control"', 'metadata.eventId="evt-1"'],
         "channels": ["oncall"]},
        default=["audit"],
    )  # fmt: skip
    assert sent(cfg, notification()) == [("oncall", "routes[0]")]
    cfg = config({"matchers": ['metadata.eventId!="evt-1"'], "channels": ["oncall"]}, default=["audit"])
    assert sent(cfg, notification()) == [("audit", "default")]


def test_a_v2_type_routed_only_by_a_route_whose_matchers_fail_falls_back_to_the_legacy_type() -> None:
    cfg = config(
        {"recipient_types": [MANAGER], "matchers": [PRODUCTION], "channels": ["managers"]},
        {"recipient_types": [OWNER], "channels": ["owners"]},
    )
    production = plan_notification(cfg, notification("production", v2=MANAGER), "e", AT)
    assert [(d.channel, d.recipientType) for d in production] == [("managers", MANAGER)]
    staging = plan_notification(cfg, notification("staging", v2=MANAGER), "e", AT)
    assert [(d.channel, d.recipientType) for d in staging] == [("owners", OWNER)]


def test_payload_values_never_reach_a_target() -> None:
    cfg = config({"matchers": ['body.requestedResource.environment=~".+"'], "channels": ["oncall"]})
    n = notification(environment="json://evil.example.com/steal", domain="audit")
    planned = plan_notification(cfg, n, "e", AT)
    ident = delivery_id("e", 0, "oncall", None)
    assert planned == [
        Delivery(ident, "e", n.kind, 0, "oncall", "auto", cfg.retry.attempts, AT, AT, OWNER, route="routes[0]")
    ]


def test_routes_without_matchers_plan_as_before() -> None:
    cfg = config({"recipient_types": [OWNER], "channels": ["owners"]}, default=["audit"])
    assert sent(cfg, notification()) == [("owners", "routes[0]")]


# --- config: matchers are compiled at load; errors name the route and the matcher --------------


def test_a_malformed_regex_fails_the_load_naming_route_and_matcher(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "channels: {oncall: {url: 'json://oncall.example.com/in'}}\n"
        "routes:\n"
        "  - channels: [oncall]\n"
        "  - name: finance-team\n"
        "    matchers:\n"
        "      - 'body.environment=\"production\"'\n"
        "      - 'body.domain=~\"(finance|sales\"'\n"
        "    channels: [oncall]\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    text = str(info.value)
    assert "routes[1].matchers" in text
    assert "route 'finance-team'" in text and "matchers[1]" in text
    assert 'body.domain=~"(finance|sales"' in text
    assert "not valid" in text


@pytest.mark.parametrize(
    ("matcher", "reason"),
    [
        ('labels.team="x"', "must be body"),
        ("body.team", "not like"),
        ('body.team="x', "not closed"),
    ],
)
def test_a_malformed_matcher_fails_validation(matcher: str, reason: str) -> None:
    with pytest.raises(ValueError) as info:
        config({"channels": ["oncall"]}, {"matchers": [matcher], "channels": ["oncall"]})
    assert "routes.1.matchers" in str(info.value)
    assert reason in str(info.value) and matcher in str(info.value)


@pytest.mark.parametrize("names", [["a", "a"], ["default"]])
def test_route_names_are_unique_and_not_default(names: list[str]) -> None:
    with pytest.raises(ValueError, match=r"routes\[\d\]\.name: (another route|the route name)"):
        config(*({"name": n, "channels": ["oncall"]} for n in names))
