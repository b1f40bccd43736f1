"""relay.config.matchers: Alertmanager's matcher syntax and semantics, read against a notification."""

from __future__ import annotations

from typing import Any

import pytest

from relay.config.matchers import STRUCTURED, MatcherError, Op, parse_line, parse_matcher, read

NOTIFICATION: dict[str, Any] = {
    "kind": "notification:access-control-request-failed",
    "sender": "access-control",
    "metadata": {"eventId": "e-1", "createdAt": None},
    "body": {
        "requestedResource": {
            "environment": "production",
            "parentSystem": {"domain": "finance", "tags": ["pii", "gold"]},
        },
        "attempts": 3,
        "ratio": 1.5,
        "urgent": True,
        "quiet": False,
        "empty": "",
        "nothing": None,
        "quote": 'say "hi"',
        "multiline": "a\nb",
        "trailing": "a\n",
        "dotted.key": "flat",
    },
}


# --- parsing: Alertmanager's grammar --------------------------------------------------------------

PARSED = [
    ('body.a="x"', ("body", "a"), Op.EQ, "x"),
    ('body.a!="x"', ("body", "a"), Op.NE, "x"),
    ('body.a=~"x.*"', ("body", "a"), Op.RE, "x.*"),
    ('body.a!~"x.*"', ("body", "a"), Op.NRE, "x.*"),
    ('  body.a  =  "spaced"  ', ("body", "a"), Op.EQ, "spaced"),
    ("body.a=bare", ("body", "a"), Op.EQ, "bare"),
    ("body.a = two words ", ("body", "a"), Op.EQ, "two words"),
    ('body.a=""', ("body", "a"), Op.EQ, ""),
    (r'body.a="She said: \"Hi\""', ("body", "a"), Op.EQ, 'She said: "Hi"'),
    (r'body.a="back\\slash"', ("body", "a"), Op.EQ, "back\\slash"),
    (r'body.a="line\nfeed"', ("body", "a"), Op.EQ, "line\nfeed"),
    (r'body.a="spurious\d"', ("body", "a"), Op.EQ, "spurious\\d"),  # unknown escape: literal backslash
    ("body.a=ends\\", ("body", "a"), Op.EQ, "ends\\"),  # a last lone backslash is literal
    ("body.a=~~~", ("body", "a"), Op.RE, "~~"),  # Alertmanager's "tricky" case
    (r"body.a==\\=\=\"", ("body", "a"), Op.EQ, '=\\=\\="'),  # and its "trickier" one
    ('body.a="x,y"', ("body", "a"), Op.EQ, "x,y"),
    ('body.a.0.b-c:d="v"', ("body", "a", "0", "b-c:d"), Op.EQ, "v"),
    ('metadata.eventId="e"', ("metadata", "eventId"), Op.EQ, "e"),
    ('kind=~"notification:.*"', ("kind",), Op.RE, "notification:.*"),
    ('sender!=""', ("sender",), Op.NE, ""),
]


@pytest.mark.parametrize(("text", "path", "op", "value"), PARSED)
def test_parse(text: str, path: tuple[str, ...], op: Op, value: str) -> None:
    m = parse_matcher(text)
    assert (m.path, m.op, m.value) == (path, op, value)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{body.a="x", kind!="y"}', [("body.a", "=", "x"), ("kind", "!=", "y")]),
        ("body.a=x,kind!=y", [("body.a", "=", "x"), ("kind", "!=", "y")]),
        ('body.a = "x" , sender !~ "a,b" , ', [("body.a", "=", "x"), ("sender", "!~", "a,b")]),
        (r'body.q != "\"" , body.c =~ "x,y"', [("body.q", "!=", '"'), ("body.c", "=~", "x,y")]),
        ('body.a="x"', [("body.a", "=", "x")]),
    ],
)
def test_one_entry_may_hold_several_matchers_as_in_alertmanager(
    line: str, expected: list[tuple[str, str, str]]
) -> None:
    assert [(".".join(m.path), m.op.value, m.value) for m in parse_line(line)] == expected


BAD = [
    ("body.a", "not like"),
    ('body.a=="x"', '== is not an operator; write body.a="x"'),  # not the value `="x"` with a quote inside
    ('body.a!=="x"', '!== is not an operator; write body.a!="x"'),
    ('body.a="open', "not closed"),
    ('body.a=close"', "double quote"),
    ('body.a="in"side"', "double quote"),
    (r'body.a==\\=\=\""', "double quote"),  # Alertmanager's failing "trickier"
    ('"body.a=\\"x\\""', "not like"),  # a double-escaped matcher
    ('body.a=~"[unclosed"', "regex '[unclosed' is not valid"),
    ('body.a!~"(x"', "is not valid"),
    ('labels.team="x"', "must be body"),
    ('bdy.team="x"', "must be body"),
    ('body="x"', "name a field"),
    ('metadata="x"', "name a field"),
    ('kind.name="x"', "plain string"),
    ('body..a="x"', "dotted path"),
    ('body.a b="x"', "not like"),
    ('0body.a="x"', "dotted path"),
    (",", "not like"),
    ("{,}", "not like"),
]


@pytest.mark.parametrize(("text", "reason"), BAD)
def test_malformed_matchers_are_refused_naming_the_matcher_and_the_problem(text: str, reason: str) -> None:
    with pytest.raises(MatcherError) as info:
        parse_line(text)
    assert reason in str(info.value)
    assert "matcher '" in str(info.value) or 'matcher "' in str(info.value)


def test_a_non_string_entry_is_refused() -> None:
    with pytest.raises(MatcherError, match="not a string"):
        parse_line(3)  # type: ignore[arg-type]


# --- reading the notification ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("kind", "notification:access-control-request-failed"),
        ("body.requestedResource.environment", "production"),
        ("body.requestedResource.parentSystem.tags.1", "gold"),
        ("body.requestedResource.parentSystem.tags.2", ""),  # past the end
        ("body.requestedResource.parentSystem.tags.x", ""),  # not an index
        ("body.attempts", "3"),
        ("body.ratio", "1.5"),
        ("body.urgent", "true"),
        ("body.quiet", "false"),
        ("body.empty", ""),
        ("body.nothing", ""),
        ("body.nothing.deeper", ""),
        ("body.absent", ""),
        ("body.attempts.deeper", ""),  # into a number
        ("metadata.createdAt", ""),
        ("body.dotted.key", ""),  # a dot always separates: keys with dots are not reachable
        ("body.requestedResource", STRUCTURED),
        ("body.requestedResource.parentSystem.tags", STRUCTURED),
    ],
)
def test_read(path: str, value: object) -> None:
    assert read(NOTIFICATION, path.split(".")) == value


# --- matching: Alertmanager's edge cases ----------------------------------------------------------

MATCHES = [
    # plain equality and its negation
    ('body.requestedResource.environment="production"', True),
    ('body.requestedResource.environment="Production"', False),
    ('body.requestedResource.environment!="production"', False),
    ('body.requestedResource.environment!="staging"', True),
    # regexes match the whole value (Alertmanager's ^(?:re)$)
    ('body.requestedResource.parentSystem.domain=~"finance|sales"', True),
    ('body.requestedResource.parentSystem.domain=~"fin"', False),
    ('body.requestedResource.parentSystem.domain=~"nance"', False),
    ('body.requestedResource.parentSystem.domain=~"fin.*"', True),
    ('body.requestedResource.parentSystem.domain!~"finance|sales"', False),
    ('body.requestedResource.parentSystem.domain!~"fin"', True),
    ('body.quote=~"a"', False),
    ('sender=~"access"', False),  # =~"a" does not match "ab"
    ('sender=~"access-.*"', True),
    ('body.trailing=~"a"', False),  # "$" would match before a final newline: the whole value must match
    ('body.multiline=~"a.b"', False),  # "." does not match a newline, as in Go
    ('body.multiline=~"(?s)a.b"', True),
    ('kind=~"(?i)NOTIFICATION:ACCESS-.*"', True),  # flags at the start, as Alertmanager users write them
    # absent and null read as ""
    ('body.absent=""', True),
    ('body.nothing=""', True),
    ('metadata.createdAt=""', True),
    ('body.empty=""', True),
    ('body.absent!=""', False),
    ('body.nothing!=""', False),
    ('body.requestedResource.environment!=""', True),
    ('body.requestedResource.environment=""', False),
    ('body.absent!~".+"', True),  # !~".+" matches absent
    ('body.absent=~".*"', True),
    ('body.absent=~".+"', False),
    ('body.requestedResource.environment!~".+"', False),
    # numbers and booleans as their JSON text
    ('body.attempts="3"', True),
    ("body.attempts=3", True),
    ('body.attempts=~"[0-9]+"', True),
    ('body.attempts="3.0"', False),
    ('body.ratio="1.5"', True),
    ('body.urgent="true"', True),
    ('body.urgent="True"', False),
    ('body.quiet="false"', True),
    # escapes
    (r'body.quote="say \"hi\""', True),
    (r'body.multiline="a\nb"', True),
    # an object or a list matches only != and !~, as a non-empty value equal to no string
    ('body.requestedResource=""', False),
    ('body.requestedResource!=""', True),
    ('body.requestedResource=~".*"', False),
    ('body.requestedResource!~".*"', True),
    ('body.requestedResource.parentSystem.tags!="pii"', True),
    ('body.requestedResource.parentSystem.tags="pii"', False),
    ('body.requestedResource.parentSystem.tags.0="pii"', True),
]


@pytest.mark.parametrize(("text", "expected"), MATCHES)
def test_matches(text: str, expected: bool) -> None:
    assert parse_matcher(text).matches(NOTIFICATION) is expected
