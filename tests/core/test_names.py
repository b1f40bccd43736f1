"""Names people know (relay.core.names): display names from the payload, else a look-up, else a readable
reference; channel labels; and the link to the resource, which no payload value can move to another host.
Rendering through relay's real template environment and an operator's template."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from relay.config import Config
from relay.core.model import Delivery, Notification
from relay.core.names import (
    MAX_NAME,
    channel_label,
    clean_name,
    join_link,
    names_of,
    payload_names,
    readable_ref,
    refs_of,
    resource_url,
)
from relay.core.rendering import Renderer, template_globals
from tests.conftest import sample_notification

ALICE, BRUNO, CARLA = "user:default/alice.rossi", "user:default/bruno.verdi", "user:default/carla.neri"
TEAM = "group:default/analytics-team"
UI = "https://ui.example.com/app"


@pytest.mark.parametrize(
    ("ref", "shown"),
    [
        (ALICE, "alice.rossi"),
        (TEAM, "analytics-team (group)"),
        ("group:team-a", "team-a (group)"),
        ("User:ns/jane", "jane"),
        ("alice.rossi@example.com", "alice.rossi@example.com"),
        ("component:default/x\n\x00y", "x y (component)"),
    ],
)
def test_a_reference_nobody_named_reads_as_its_name(ref: str, shown: str) -> None:
    assert readable_ref(ref) == shown


def test_a_display_name_is_one_bounded_line() -> None:
    assert clean_name("  Alice\n\tRossi\x07 ") == "Alice Rossi"
    assert clean_name("") is None and clean_name(None) is None and clean_name(3) is None
    long = clean_name("x" * 500)
    assert long is not None and len(long) == MAX_NAME and long.endswith("…")


def test_the_payload_names_its_people_where_it_can() -> None:
    data = sample_notification()
    # A recipient the platform resolved a name for (userEntityFields), flat as the platform sends it.
    data["messages"][2]["recipients"][0]["spec.profile.displayName"] = "Carla Neri"
    data["messages"][2]["recipients"][0]["spec.email"] = "Carla.Neri@example.com"
    notification = Notification.model_validate(data)
    assert payload_names(notification) == {
        ALICE: "Alice Rossi",  # body.requester
        BRUNO: "Bruno Verdi",  # body.requestedResource.owner
        CARLA: "Carla Neri",
        "carla.neri@example.com": "Carla Neri",
    }
    assert refs_of(notification) == [BRUNO, ALICE, CARLA, TEAM]


def test_only_references_of_people_are_named() -> None:
    body = {
        "reviewer": {"userRef": "user:default/rita", "href": "https://x.example/y", "urn": "urn:dmb:dp:x:1"},
        "watchers": {"approvedUsers": ["user:default/ugo", "https://evil.example/z"], "memberRefs": "group:ops"},
        "ownerRef": "user:default/not-a-list-of-people",
    }
    notification = Notification.model_validate(sample_notification(body=body, messages=[]))
    assert refs_of(notification) == ["user:default/rita", "group:ops", "user:default/ugo"]


def test_names_come_from_the_payload_then_the_look_up_then_the_reference() -> None:
    asked: list[list[str]] = []

    def lookup(refs: Sequence[str]) -> Mapping[str, str]:
        asked.append(list(refs))
        return {TEAM: "Analytics\nTeam", ALICE: "Not asked for", "user:default/stranger": "Not in the payload"}

    names = names_of(Notification.model_validate(sample_notification()), lookup)
    assert asked == [[CARLA, TEAM]]  # only what the payload names no one for
    assert names == {ALICE: "Alice Rossi", BRUNO: "Bruno Verdi", CARLA: "carla.neri", TEAM: "Analytics Team"}


def _render(template: str, tmp_path: Path, config: Config, lookup: Any = None, fmt: str = "txt") -> str:
    (tmp_path / "access-control-request-failed").mkdir()
    (tmp_path / "access-control-request-failed" / f"default.{fmt}.j2").write_text(template)
    notification = Notification.model_validate(sample_notification())
    record = Delivery("d1", "e1", notification.kind, 0, "owners", "auto", 3, 0.0, 0.0, "recipient-type:x")
    rendered = Renderer(tmp_path, template_globals(config)).render(notification, record, fmt, None, lookup)
    assert rendered.error is None, rendered.error
    return rendered.body


def test_an_operators_template_shows_names_and_the_resource_link(tmp_path: Path) -> None:
    config = Config.model_validate({"platform": {"url": "https://api.example.com", "ui_url": UI + "/"}})
    body = _render(
        "{{ body.requestedUsers|map('display_name')|join(', ') }} | {{ body.requester|display_name }}"
        " | {{ names['user:default/carla.neri'] }} | {{ 'user:default/nobody'|display_name }} | {{ resource_url }}",
        tmp_path,
        config,
        lambda refs: {TEAM: "Analytics Team"},
    )
    link = f"{UI}/marketplace/systems/urn:dmb:dp:finance:invoices:1"
    assert body == f"Alice Rossi, Analytics Team | Alice Rossi | carla.neri | nobody | {link}"


def test_without_a_ui_url_the_link_goes_to_the_platform_url_and_without_either_there_is_none(tmp_path: Path) -> None:
    api = Config.model_validate({"platform": {"url": "https://platform.example.com/"}})
    shown = _render("{{ resource_url }}|{{ platform_ui_url }}", tmp_path, api)
    link = "https://platform.example.com/marketplace/systems/urn:dmb:dp:finance:invoices:1"
    assert shown == f"{link}|https://platform.example.com"
    assert resource_url(None, sample_notification()["body"]) is None


@pytest.mark.parametrize(
    ("link", "joined"),
    [
        ("/marketplace/systems/urn:dmb:dp:x:1", f"{UI}/marketplace/systems/urn:dmb:dp:x:1"),
        ("marketplace/x?tab=2#top", f"{UI}/marketplace/x?tab=2#top"),
        ('/a b"<c>\\d', f"{UI}/a%20b%22%3Cc%3E%5Cd"),  # encoded: nothing breaks out of an href or a markdown link
    ],
)
def test_a_relative_link_is_joined_below_the_ui_url(link: str, joined: str) -> None:
    assert join_link(UI, link) == joined
    assert join_link(UI + "/", link) == joined


@pytest.mark.parametrize(
    "link",
    [
        "https://evil.example/x",
        "http:evil.example",
        "//evil.example/x",
        "/\\evil.example/x",
        "\\\\evil.example/x",
        "\\/evil.example",
        "javascript:alert(1)",
        "data:text/html,<script>",
        "/x\r\nLocation: https://evil.example",
        "/x\x00",
        "/" + "a" * 2001,
        "",
    ],
)
def test_no_link_from_the_payload_changes_the_scheme_or_the_host(link: str) -> None:
    assert join_link(UI, link) is None
    body = {"requestedResource": {"parentSystem": {"relativeLink": link}}}
    assert resource_url(UI, body) is None


@pytest.mark.parametrize("base", ["ftp://ui.example.com", "ui.example.com", "https://", ""])
def test_only_an_http_base_makes_a_link(base: str) -> None:
    assert join_link(base, "/x") is None


def test_every_joined_link_stays_on_the_ui_host() -> None:
    tries = ["/@evil.example", "/:80@evil.example", "/%2F%2Fevil.example", "?@evil.example"]
    for link in tries:
        joined = join_link(UI, link)
        assert joined is not None and urlsplit(joined).netloc == "ui.example.com", link


@pytest.mark.parametrize("link", ["/..//evil.example", "/a/../../x", "%2e%2e/x", "/./x", "\\..\\x", "a/%2E%2E"])
def test_no_link_climbs_out_of_the_ui_urls_path(link: str) -> None:
    """Below a base with a path (`https://ui.example.com/platform`), a `.` or `..` segment, in any spelling a
    browser resolves, would leave it: refused."""
    assert join_link("https://ui.example.com/platform", link) is None


def test_a_display_name_loses_its_bidirectional_controls() -> None:
    assert clean_name("Alice\u202e gnp.exe\u2066x\u2069") == "Alice gnp.exex"


def test_a_channel_is_shown_by_its_label_else_its_readable_name() -> None:
    config = Config.model_validate(
        {"channels": {"people-email": {"url": "mailto://x", "label": "E-mail"}, "owners_slack": {"url": "json://x"}}}
    )
    assert channel_label(config, "people-email") == "E-mail"
    assert channel_label(config, "owners_slack") == "Owners slack"
    assert channel_label(config, "*") == "every channel"
    assert channel_label(config, "gone-channel") == "Gone channel"
