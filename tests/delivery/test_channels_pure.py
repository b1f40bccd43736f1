"""relay.delivery.channels, the parts that send nothing: formats, per-recipient addressing, redaction, retry class."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest

from relay.core.redaction import url_secrets
from relay.delivery.apprise_compat import transient_status
from relay.delivery.channels import (
    AddressError,
    address_url,
    channel_format,
    describe_url,
    redact,
    scheme_of,
)

MAILTOS = "mailtos://relay:pw-secret-1@smtp.example.com?from=relay@example.com&mode=starttls"
MAILTO = "mailto://smtp.example.com:2525?from=relay@example.com"


def query(url: str) -> list[tuple[str, str]]:
    return parse_qsl(urlsplit(url).query, keep_blank_values=True)


# --- channel_format -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "override", "expected"),
    [
        ("slack://T/B/C", None, "md"),
        ("SLACK://T/B/C", None, "md"),
        ("msteams://a/b/c", None, "md"),
        ("workflows://host:443/wf/sig", None, "md"),
        ("discord://id/token", None, "md"),
        ("matrixs://u:p@host/#room", None, "md"),
        ("mailto://smtp.example.com", None, "html"),
        ("mailtos://u:p@smtp.example.com", None, "html"),
        ("json://host/path", None, "txt"),
        ("form://host/path", None, "txt"),
        ("https://host/path", None, "txt"),
        ("no-scheme-at-all", None, "txt"),
        ("", None, "txt"),
        ("mailto://smtp.example.com", "txt", "txt"),
        ("slack://T/B/C", "txt", "txt"),
        ("json://host/path", "html", "html"),
        ("json://host/path", "md", "md"),
    ],
)
def test_channel_format(url: str, override: str | None, expected: str) -> None:
    assert channel_format(url, override) == expected


@pytest.mark.parametrize(
    ("url", "scheme"),
    [("slack://T/B/C", "slack"), ("MailTos://x", "mailtos"), ("nothing", ""), ("a:b", "")],
)
def test_scheme_of(url: str, scheme: str) -> None:
    assert scheme_of(url) == scheme


# --- address_url --------------------------------------------------------------------------------

VALID = [
    "a@b.co",
    "bruno.verdi@example.com",
    "first.last+tag@sub.example.co.uk",
    "o#k@example.com",
    "pct%x@example.com",
    "eq=ual@example.com",
    "amp{x}@example.com",
]


@pytest.mark.parametrize("url", [MAILTOS, MAILTO, "mailto://smtp.example.com", "mailtos://u:p@h.example.com/"])
@pytest.mark.parametrize("address", VALID)
def test_address_url_sets_exactly_one_to(url: str, address: str) -> None:
    result = address_url(url, address)
    params = query(result)
    assert [v for k, v in params if k.lower() == "to"] == [address]
    # Every other parameter, and the scheme, host and credentials, are untouched.
    assert [p for p in params if p[0].lower() != "to"] == query(url)
    before, after = urlsplit(url), urlsplit(result)
    assert (after.scheme, after.netloc, after.path) == (before.scheme, before.netloc, before.path)


@pytest.mark.parametrize(
    "url",
    [
        "mailto://smtp.example.com?to=old@x.com",
        "mailto://smtp.example.com?To=old@x.com&from=r@example.com",
        "mailtos://u:p@smtp.example.com?to=old@x.com&to=older@x.com&mode=ssl",
        "mailtos://u:p@smtp.example.com?TO=old@x.com",
    ],
)
def test_address_url_replaces_existing_to(url: str) -> None:
    result = address_url(url, "new@example.com")
    tos = [v for k, v in query(result) if k.lower() == "to"]
    assert tos == ["new@example.com"]
    assert "old@x.com" not in result


@pytest.mark.parametrize(
    ("url", "address", "expected"),
    [
        ("json://hooks.example.com/user/{email}", "a@b.com", "json://hooks.example.com/user/a@b.com"),
        ("json://hooks.example.com/n?user={email}", "a@b.com", "json://hooks.example.com/n?user=a@b.com"),
        ("json://h.example.com/{email}/{email}", "a@b.com", "json://h.example.com/a@b.com/a@b.com"),
        # Anything with a URL meaning is percent-encoded.
        ("json://hooks.example.com/user/{email}", "a+b@c.com", "json://hooks.example.com/user/a%2Bb@c.com"),
        ("json://hooks.example.com/user/{email}", "o#k@c.com", "json://hooks.example.com/user/o%23k@c.com"),
        ("json://hooks.example.com/user/{email}", "p%x@c.com", "json://hooks.example.com/user/p%25x@c.com"),
        ("json://hooks.example.com/user/{email}", "e=q@c.com", "json://hooks.example.com/user/e%3Dq@c.com"),
        # A placeholder wins over to= for e-mail schemes too.
        ("mailto://smtp.example.com/{email}", "a@b.com", "mailto://smtp.example.com/a@b.com"),
    ],
)
def test_address_url_fills_email_placeholder(url: str, address: str, expected: str) -> None:
    assert address_url(url, address) == expected


@pytest.mark.parametrize("url", ["slack://TTTT/BBBB/CCCC", "json://hooks.example.com/in", "msteams://a/b/c"])
def test_address_url_leaves_other_channels_alone(url: str) -> None:
    assert address_url(url, "a@b.com") == url


HOSTILE = [
    "a@b",
    "x@y.com?to=evil@z.com",
    "a@b.com,c@d.com",
    "a@b.com;c@d.com",
    "mailto:a@b.com",
    "a b@c.com",
    "a@b.com/x",
    "a@b.com&to=evil@z.com",
    "a@b.com&bcc=evil@z.com",
    "a@b.com#x",
    "a@b.com%26to%3Devil@z.com",
    "a@b.com\r\nBcc: evil@z.com",
    "evil.com/@b.com",
    "a@evil.com:25",
    "u:p@evil.com",
    "",
]


@pytest.mark.parametrize("url", [MAILTOS, MAILTO, "json://hooks.example.com/user/{email}", "slack://T/B/C"])
@pytest.mark.parametrize("address", HOSTILE)
def test_address_url_refuses_hostile_addresses(url: str, address: str) -> None:
    with pytest.raises(AddressError):
        address_url(url, address)


# --- url_secrets and redact --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "secrets", "visible"),
    [
        (
            "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ",
            ["T1JJ3T3L2", "A1BRTD4JD", "TIiajkdnlazkcOXrIdevi7FQ"],
            ["slack://"],
        ),
        ("slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ/#general", ["TIiajkdnlazkcOXrIdevi7FQ"], []),
        (
            "mailtos://mailer:pw-secret-1@smtp.example.com?from=relay@example.com",
            ["pw-secret-1"],
            ["smtp.example.com", "from=relay@example.com"],
        ),
        ("mailto://user%40corp:my%2Fpass@smtp.example.com", ["user@corp", "my/pass"], ["smtp.example.com"]),
        ("json://hooks.example.com/in?+X-Token=hdr-secret-99", ["hdr-secret-99"], ["hooks.example.com", "X-Token"]),
        (
            "json://hooks.example.com/in?+Authorization=tok123456&+X-Other=val-7890",
            ["tok123456", "val-7890"],
            ["hooks.example.com"],
        ),
        ("form://user:formpass@hooks.example.com:8443/p", ["formpass"], ["hooks.example.com"]),
        ("msteams://teamname/tokenA123/tokenB456/tokenC789", ["tokenA123", "tokenB456", "tokenC789"], []),
        (
            "workflows://prod-01.westus.logic.azure.com:443/wfid12345/sig-abcdef",
            ["wfid12345", "sig-abcdef"],
            ["prod-01.westus.logic.azure.com"],
        ),
        ("discord://123456789/webhook-token-xyz", ["123456789", "webhook-token-xyz"], []),
        ("json://localhost:8080/hook?token=qs-token-1", ["qs-token-1"], ["localhost"]),
    ],
)
def test_redact_hides_channel_credentials(url: str, secrets: list[str], visible: list[str]) -> None:
    parts = url_secrets(url)
    for secret in secrets:
        assert secret in parts
    text = f"POST to {url} failed for {' and '.join(secrets)}"
    shown = redact(text, parts)
    for secret in secrets:
        assert secret not in shown
    assert "****" in shown
    for piece in visible:
        assert piece in shown


@pytest.mark.parametrize(
    ("url", "not_secret"),
    [
        ("mailtos://u:pw-secret-1@smtp.example.com?from=relay@example.com", "relay@example.com"),
        ("mailtos://u:pw-secret-1@smtp.example.com?to=dest@example.com", "dest@example.com"),
        ("mailtos://u:pw-secret-1@smtp.example.com?mode=starttls", "starttls"),
        ("mailtos://u:pw-secret-1@smtp.example.com", "smtp.example.com"),
        ("json://hooks.example.com/in?method=POST", "hooks.example.com"),
        ("json://localhost:8080/in", "localhost"),
    ],
)
def test_url_secrets_leaves_addresses_and_hosts_visible(url: str, not_secret: str) -> None:
    assert not_secret not in url_secrets(url)


def test_url_secrets_ignores_short_pieces_and_sorts_longest_first() -> None:
    parts = url_secrets("slack://abc/longer-token-1/xy/mid-tok")
    assert all(len(p) >= 4 for p in parts)
    assert "abc" not in parts and "xy" not in parts
    assert list(parts) == sorted(parts, key=len, reverse=True)


@pytest.mark.parametrize(
    ("text", "secrets", "expected"),
    [
        ("token=abcd1234", ["abcd1234"], "token=****"),
        ("abcd1234 and abcd1234", ["abcd1234"], "**** and ****"),
        # Longest first, so a secret containing another is hidden whole.
        ("key abcd1234efgh", ["abcd", "abcd1234efgh"], "key ****"),
        ("key abcd1234efgh", ["abcd1234efgh", "abcd"], "key ****"),
        # Short or empty secrets are not scrubbed (they would eat ordinary text).
        ("the cat sat", ["cat", ""], "the cat sat"),
        ("nothing here", [], "nothing here"),
        ("no match", ["zzzz"], "no match"),
    ],
)
def test_redact(text: str, secrets: list[str], expected: str) -> None:
    assert redact(text, secrets) == expected


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ", "TIiajkdnlazkcOXrIdevi7FQ"),
        ("mailtos://relay:pw-secret-1@smtp.example.com?from=relay@example.com", "pw-secret-1"),
        ("json://hooks.example.com/in?+X-Token=hdr-secret-99", "hdr-secret-99"),
    ],
)
def test_describe_url_hides_secrets(url: str, secret: str) -> None:
    shown = describe_url(url)
    assert secret not in shown
    assert shown.startswith(url.split("://")[0] + "://")


def test_describe_url_of_unknown_scheme() -> None:
    assert describe_url("nosuchscheme://secret-token-here") == "nosuchscheme://****"


@pytest.mark.parametrize(
    ("url", "leak"),
    [
        ("json://hooks.example.com/in?+Authorization=Bearer%20tok123456", "tok123456"),
        ("json://hooks.example.com/in?+X-Token=abc+def%2Fghi", "def"),
    ],
)
def test_describe_url_hides_encoded_header_values(url: str, leak: str) -> None:
    assert leak not in describe_url(url)


def test_redact_hides_percent_encoded_password() -> None:
    url = "mailtos://relay:p%40ssw0rd@smtp.example.com"
    assert "ssw0rd" not in redact(f"cannot connect: {url}", url_secrets(url))


# --- transient_status -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "transient"),
    [
        (None, True),
        (408, True),
        (425, True),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (504, True),
        (599, True),
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (405, False),
        (410, False),
        (413, False),
        (422, False),
        (499, False),
    ],
)
def test_transient_status(status: int | None, transient: bool) -> None:
    assert transient_status(status) is transient
