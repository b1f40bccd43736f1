"""The pure side of digests: what is gathered together, for how long, and relay's own digest in each format."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay.config import DigestConfig
from relay.core.rendering import Renderer
from relay.digests.model import (
    CATCH_UP_SECONDS,
    RELEASED_SECONDS,
    DigestItem,
    digest_id,
    gather_key,
    human_duration,
    render_digest,
    window_for,
)

pytestmark = pytest.mark.dated

ITEMS = [
    DigestItem("notification:a", "e1", "2026-11-25T06:00:00.000Z", "First <b>", "one\ntwo", "recipient-type:x"),
    DigestItem("notification:b", "e2", "2026-11-25T06:01:00.000Z", "Second", "", None),
]


def test_one_digest_per_route_channel_and_address_the_address_compared_without_case() -> None:
    key = gather_key("owners", "mail", "Alice@Example.com")
    assert key == gather_key("owners", "mail", "alice@example.com")
    others = [
        gather_key("owners", "mail", "bob@example.com"),
        gather_key("others", "mail", "alice@example.com"),
        gather_key("owners", "slack", "alice@example.com"),
        gather_key("owners", "mail", None),
    ]
    assert len({key, *others}) == 5
    assert digest_id(key, "d1") == digest_id(key, "d1") != digest_id(key, "d2")


def test_the_window_and_the_catch_up_after_quiet_hours() -> None:
    assert window_for(DigestConfig(window=900), was_held=False) == 900
    assert window_for(DigestConfig(window=900), was_held=True) == CATCH_UP_SECONDS
    assert window_for(DigestConfig(window=900), was_held=True, released=True) == RELEASED_SECONDS
    assert window_for(DigestConfig(window=1), was_held=False, released=True) == 1
    assert window_for(DigestConfig(window=2), was_held=True) == 2


def test_windows_read_as_people_write_them() -> None:
    assert [human_duration(s) for s in (900, 5400, 90, 1, 2.5, 86400 + 60)] == [
        "15m",
        "1h30m",
        "1m30s",
        "1s",
        "2.5s",
        "1d1m",
    ]


def test_relay_s_own_digest_in_each_format() -> None:
    renderer = Renderer(None)
    txt = render_digest(renderer, ITEMS, "hook", None, 900, "txt")
    assert (txt.title, txt.format, txt.template, txt.error) == (
        "2 notifications",
        "txt",
        "relay:_digest/default.txt.j2",
        None,
    )
    assert txt.body.splitlines()[:4] == ["1. First <b>", "   one", "   two", "   received 2026-11-25T06:00:00.000Z"]
    assert "2. Second" in txt.body
    md = render_digest(renderer, ITEMS, "slack", None, 900, "md")
    # the platform's title and text are escaped for chat markdown, as every value in an md template
    assert md.body.startswith("**1. First \\<b\\>**\none\ntwo\n_received 2026-11-25T06:00:00.000Z_")
    html = render_digest(renderer, ITEMS, "mail", "alice@example.com", 900, "html")
    assert html.format == "html" and "First &lt;b&gt;" in html.body and "First <b>" not in html.body
    assert "over 15m for alice@example.com" in html.body
    assert html.text is not None and html.text.startswith("1. First <b>")


def test_an_operators_template_by_channel_wins_and_a_broken_one_falls_back(tmp_path: Path) -> None:
    (tmp_path / "_digest").mkdir()
    (tmp_path / "_digest" / "hook.txt.j2").write_text(
        "{% block title %}T{% endblock %}{{ items|map(attribute='eventId')|join(',') }}"
    )
    (tmp_path / "_digest" / "default.txt.j2").write_text("{{ 1 / 0 }}")
    renderer = Renderer(tmp_path, shipped=False)
    mine = render_digest(renderer, ITEMS, "hook", None, 60, "txt")
    assert (mine.title, mine.body, mine.template) == ("T", "e1,e2", "_digest/hook.txt.j2")
    broken = render_digest(renderer, ITEMS, "other", None, 60, "txt")
    assert broken.template == "relay:_digest/default.txt.j2" and broken.title == "2 notifications"
    assert broken.error is not None and "ZeroDivisionError" in broken.error


def test_the_digest_names_a_channel_by_its_label_when_it_has_no_address() -> None:
    """Recipients see a channel's label, not its config name (issue 38: names people know)."""
    renderer = Renderer(None)
    html = render_digest(renderer, ITEMS, "team-mail", None, 900, "html", {"channel_label": "Team e-mail"})
    assert "for Team e-mail." in html.body and "team-mail" not in html.body
