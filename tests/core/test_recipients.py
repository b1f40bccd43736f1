"""relay.core.recipients: reading recipient fields (flat or nested), the e-mail grammar, the recipient type."""

from __future__ import annotations

from typing import Any

import pytest

from relay.core.recipients import (
    MAX_EMAIL_LENGTH,
    email_of,
    reference_of,
    resolve_recipient_type,
    user_field,
    valid_email,
)

OWNER = "recipient-type:system-owner"
REQUESTER = "recipient-type:access-control-requester"
MANAGER = "recipient-type:project-data-access-manager"


def flat(**fields: Any) -> dict[str, Any]:
    """A recipient with dotted keys: flat(spec__email=...) -> {"spec.email": ...}."""
    return {k.replace("__", "."): v for k, v in fields.items()}


def nested(path: str, value: Any, **extra: Any) -> dict[str, Any]:
    """A recipient with `value` at the nested dotted `path`."""
    node: dict[str, Any] = {}
    root = node
    parts = path.split(".")
    for part in parts[:-1]:
        node[part] = {}
        node = node[part]
    node[parts[-1]] = value
    root.update(extra)
    return root


# --- user_field ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recipient", "dotted", "expected"),
    [
        (flat(spec__email="a@x.com"), "spec.email", "a@x.com"),
        (nested("spec.email", "a@x.com"), "spec.email", "a@x.com"),
        (nested("spec.profile.email", "p@x.com"), "spec.profile.email", "p@x.com"),
        (flat(spec__profile__email="p@x.com"), "spec.profile.email", "p@x.com"),
        # A null flat key does not hide the nested one.
        ({"spec.email": None, "spec": {"email": "n@x.com"}}, "spec.email", "n@x.com"),
        # The flat key wins when both carry a value.
        ({"spec.email": "f@x.com", "spec": {"email": "n@x.com"}}, "spec.email", "f@x.com"),
        ({"spec.email": None}, "spec.email", None),
        ({}, "spec.email", None),
        ({"spec": None}, "spec.email", None),
        ({"spec": "not-a-dict"}, "spec.email", None),
        ({"spec": {"profile": None}}, "spec.profile.email", None),
        ({"spec": {}}, "spec.email", None),
        (flat(metadata__name="bruno"), "metadata.name", "bruno"),
        ({"kind": "User"}, "kind", "User"),
    ],
)
def test_user_field_reads_flat_and_nested(recipient: dict[str, Any], dotted: str, expected: Any) -> None:
    assert user_field(recipient, dotted) == expected


# --- valid_email --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "a@b.co",
        "bruno.verdi@example.com",
        "first.last+tag@sub.example.co.uk",
        "x_y-z@my-host.example.org",
        "UPPER@EXAMPLE.COM",
        "o#k@example.com",
        "1234@example.io",
    ],
)
def test_valid_email_accepts(address: str) -> None:
    assert valid_email(address)


@pytest.mark.parametrize(
    "address",
    [
        "a@b",
        "x@y.com?to=evil@z.com",
        "a@b.com,c@d.com",
        "a@b.com;c@d.com",
        "mailto:a@b.com",
        "mailto://a@b.com",
        "a b@c.com",
        "a@b.com/x",
        "a@b.com&cc=evil@z.com",
        "a@b.com ",
        " a@b.com",
        "a@b.com\n",
        "a@b.com\r\nBcc: evil@z.com",
        '"quoted"@b.com',
        "<a@b.com>",
        "Alice <a@b.com>",
        "a@@b.com",
        "@b.com",
        "a@",
        "a@.com",
        "a@-b.com",
        "a@b-.com",
        "a..b@c.com",
        ".a@b.com",
        "a.@b.com",
        "a@b.c",
        "a@b.com:25",
        "user:pass@b.com",
        "a@b.com#frag",
        "",
        "plainaddress",
        "a@[127.0.0.1]",
        "a@127.0.0.1",
        None,
        42,
        ["a@b.com"],
        {"email": "a@b.com"},
    ],
)
def test_valid_email_refuses_anything_that_could_alter_a_url(address: Any) -> None:
    assert not valid_email(address)


def test_valid_email_length_bound() -> None:
    domain = "@example.com"
    at_limit = "a" * (MAX_EMAIL_LENGTH - len(domain)) + domain
    over = "a" + at_limit
    assert len(at_limit) == MAX_EMAIL_LENGTH
    assert valid_email(at_limit)
    assert not valid_email(over)


# --- email_of -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recipient", "expected"),
    [
        (flat(spec__email="flat@x.com"), "flat@x.com"),
        (nested("spec.email", "nested@x.com"), "nested@x.com"),
        (flat(spec__profile__email="pf@x.com"), "pf@x.com"),
        (nested("spec.profile.email", "pn@x.com"), "pn@x.com"),
        ({"email": "plain@x.com"}, "plain@x.com"),
        # spec.email comes before spec.profile.email, which comes before email.
        ({"spec": {"email": "s@x.com", "profile": {"email": "p@x.com"}}, "email": "e@x.com"}, "s@x.com"),
        ({"spec": {"profile": {"email": "p@x.com"}}, "email": "e@x.com"}, "p@x.com"),
        ({"spec.email": None, "spec.profile.email": "p@x.com"}, "p@x.com"),
        # Surrounding whitespace is trimmed; blank values are skipped.
        (flat(spec__email="  pad@x.com \n"), "pad@x.com"),
        ({"spec.email": "   ", "email": "e@x.com"}, "e@x.com"),
        # Not a string: not an address.
        ({"spec.email": 12345}, None),
        ({"spec.email": ["a@x.com"]}, None),
        ({"spec.email": None}, None),
        ({"userRef": "user:default/carla"}, None),
        ({}, None),
        # email_of does not validate: invalid text is returned for the caller to refuse.
        (flat(spec__email="a@b"), "a@b"),
    ],
)
def test_email_of(recipient: dict[str, Any], expected: str | None) -> None:
    assert email_of(recipient) == expected


# --- reference_of -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recipient", "expected"),
    [
        ({"userRef": "user:default/alice"}, "user:default/alice"),
        ({"userRef": "user:default/alice", "metadata.name": "other"}, "user:default/alice"),
        ({"userRef": None, "metadata.name": "alice"}, "alice"),
        ({"userRef": None, "metadata": {"name": "alice"}}, "alice"),
        ({"userRef": "", "metadata.name": "alice"}, "alice"),
        ({"userRef": 7, "metadata.name": "alice"}, "alice"),
        ({"userRef": None, "metadata.name": None}, None),
        ({"userRef": None, "metadata.name": ""}, None),
        ({"userRef": None, "metadata.name": 5}, None),
        ({}, None),
    ],
)
def test_reference_of(recipient: dict[str, Any], expected: str | None) -> None:
    assert reference_of(recipient) == expected


# --- recipient type -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("legacy", "v2", "expected"),
    [
        (OWNER, MANAGER, [MANAGER, OWNER]),
        (OWNER, OWNER, [OWNER]),
        (OWNER, None, [OWNER]),
        (OWNER, "", [OWNER]),
        (None, MANAGER, [MANAGER]),
        ("", MANAGER, [MANAGER]),
        (None, None, []),
        ("", "", []),
    ],
)
def test_recipient_types_are_asked_v2_first(legacy: str | None, v2: str | None, expected: list[str]) -> None:
    """With none routed, each real candidate is asked once, v2 first."""
    asked: list[str] = []
    resolve_recipient_type(legacy, v2, lambda candidate: bool(asked.append(candidate)))
    assert asked == expected


@pytest.mark.parametrize(
    ("legacy", "v2", "routed", "expected"),
    [
        # v2 wins when present, non-null and routed.
        (OWNER, MANAGER, {OWNER, MANAGER}, MANAGER),
        (OWNER, MANAGER, {MANAGER}, MANAGER),
        # v2 not routed: the legacy type, when routed.
        (OWNER, MANAGER, {OWNER}, OWNER),
        # v2 null, missing or empty: legacy.
        (OWNER, None, {OWNER, MANAGER}, OWNER),
        (OWNER, "", {OWNER}, OWNER),
        # Nothing routed: the best name (v2, else legacy) for the default route.
        (OWNER, MANAGER, set(), MANAGER),
        (OWNER, None, set(), OWNER),
        (None, MANAGER, set(), MANAGER),
        (None, None, {OWNER}, None),
        (REQUESTER, REQUESTER, {REQUESTER}, REQUESTER),
    ],
)
def test_resolve_recipient_type(legacy: str | None, v2: str | None, routed: set[str], expected: str | None) -> None:
    asked: list[str] = []

    def is_routed(candidate: str) -> bool:
        asked.append(candidate)
        return candidate in routed

    assert resolve_recipient_type(legacy, v2, is_routed) == expected
    # Only real candidates are ever asked about, v2 first.
    assert asked == list(dict.fromkeys(t for t in (v2, legacy) if t))[: len(asked)]
