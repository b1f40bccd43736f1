"""Signed links: a link opens only its own scope and person; tampered, foreign or expired ones are refused."""

from __future__ import annotations

import pytest

from relay.config import PreferencesConfig
from relay.web.links import (
    SCOPE_PREFERENCES,
    SCOPE_UNSUBSCRIBE,
    Link,
    LinkRefused,
    make_token,
    preferences_url,
    read_token,
    unsubscribe_url,
)

SECRET = "s" * 32
DAY = 86400.0


def _refused(
    token: str, scope: str = SCOPE_PREFERENCES, now: float = 1000.0, ttl: float = DAY, secret: str = SECRET
) -> int:
    with pytest.raises(LinkRefused) as refused:
        read_token(secret, token, scope, now, ttl)
    return refused.value.status


def test_a_link_reads_back_its_person_scope_and_time() -> None:
    token = make_token(SECRET, Link("user:default/alice.rossi", SCOPE_UNSUBSCRIBE, 1000.0, "notification:x", "mail"))
    link = read_token(SECRET, token, SCOPE_UNSUBSCRIBE, 1000.0 + 60, DAY)
    assert (link.person, link.kind, link.channel) == ("user:default/alice.rossi", "notification:x", "mail")


def test_tampered_foreign_and_expired_links_are_refused() -> None:
    token = make_token(SECRET, Link("user:default/alice.rossi", SCOPE_PREFERENCES, 1000.0))
    body, _, mac = token.partition(".")
    other = make_token(SECRET, Link("user:default/bruno.verdi", SCOPE_PREFERENCES, 1000.0))
    assert _refused(other.partition(".")[0] + "." + mac) == 403  # another person under this signature
    assert _refused(body + "." + mac[:-2] + ("AA" if not mac.endswith("AA") else "BB")) == 403
    assert _refused(token, secret="t" * 32) == 403  # another relay's secret
    assert _refused(token, scope=SCOPE_UNSUBSCRIBE) == 403  # a page link used to unsubscribe
    assert _refused("not-a-token") == 403
    assert _refused(token, now=1000.0 + DAY + 1) == 410
    assert _refused(token, now=1000.0 + 10, ttl=5) == 410  # a shorter TTL retires old links at once


def test_urls_only_with_a_public_url() -> None:
    assert preferences_url(PreferencesConfig(), "p", 0) is None
    config = PreferencesConfig(public_url="https://relay.example.com/", secret=SECRET)
    url = preferences_url(config, "p", 0)
    assert url is not None and url.startswith("https://relay.example.com/preferences/")
    assert (unsubscribe_url(config, "p", "k", "c", 0) or "").startswith("https://relay.example.com/unsubscribe/")


def test_a_public_url_needs_a_long_enough_secret() -> None:
    with pytest.raises(ValueError, match="secret"):
        PreferencesConfig(public_url="https://relay.example.com")
    with pytest.raises(ValueError, match="32 bytes"):
        PreferencesConfig(public_url="https://relay.example.com", secret="short")


def test_the_one_click_headers_leave_the_channels_own_arguments_byte_for_byte() -> None:
    """Apprise reads a `+` in a URL's arguments as a `+`: the channel's own arguments are never re-encoded."""
    from relay.preferences.sending import with_unsubscribe_headers

    url = "mailtos://u:p@mail.example.com?to=alice%2Btag@example.com&from=Data%20Platform%20%3Cno@x%3E&name=A+B"
    link = "https://relay.example.com/unsubscribe/tok"
    got = with_unsubscribe_headers(url, {"unsubscribe_url": link})
    assert got.startswith(url + "&")
    assert "%2BList-Unsubscribe=%3Chttps%3A%2F%2Frelay.example.com%2Funsubscribe%2Ftok%3E" in got
    assert got.endswith("%2BList-Unsubscribe-Post=List-Unsubscribe%3DOne-Click")
    # Added again (a retry renders anew): replaced, never doubled.
    assert with_unsubscribe_headers(got, {"unsubscribe_url": link}) == got


def test_a_token_has_one_spelling() -> None:
    """The signature's base64 is read canonically: its last character's unused bits changed, the same bytes
    spelt another way, is refused."""
    import base64

    token = make_token(SECRET, Link("user:default/alice.rossi", SCOPE_PREFERENCES, 1000.0, address="a@example.com"))
    assert read_token(SECRET, token, SCOPE_PREFERENCES, 1000.0, DAY).person == "user:default/alice.rossi"
    body, mac = token.split(".")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(mac[-1])
    twins = [mac[:-1] + alphabet[last ^ bit] for bit in (1, 2, 3)]  # 32 bytes: the last character's low 2 bits
    for twin in twins:
        assert base64.urlsafe_b64decode(twin + "=") == base64.urlsafe_b64decode(mac + "=")
        with pytest.raises(LinkRefused):
            read_token(SECRET, f"{body}.{twin}", SCOPE_PREFERENCES, 1000.0, DAY)


def test_a_link_names_its_address_and_one_click_only_a_literal_kind_on_a_named_channel() -> None:
    token = make_token(SECRET, Link("user:default/alice.rossi", SCOPE_PREFERENCES, 1000.0, address="a@example.com"))
    assert read_token(SECRET, token, SCOPE_PREFERENCES, 1000.0, DAY).address == "a@example.com"
    for kind, channel in (("notification:*", "mail"), ("notification:a?", "mail"), ("notification:x", "*")):
        assert (
            _refused(
                make_token(SECRET, Link("a@example.com", SCOPE_UNSUBSCRIBE, 1000.0, kind, channel)), SCOPE_UNSUBSCRIBE
            )
            == 403
        )
    assert _refused(make_token(SECRET, Link("user:default/a\tb", SCOPE_PREFERENCES, 1000.0))) == 403
    config = PreferencesConfig(public_url="https://relay.example.com/", secret=SECRET)
    assert unsubscribe_url(config, "a@example.com", "notification:*", "mail", 0) is None
