"""Alertmanager's own test cases for matchers, ported: pkg/labels/parse_test.go (TestMatchers) and
matcher_test.go (TestMatcher), at prometheus/alertmanager 68fb2d5.

Alertmanager's label names become dotted paths (`foo` is `body.foo` here; its `{invalid-name=...}` case is
left out: `-` is allowed in a path segment). Its error texts differ; the cases that fail there fail here.
Then what RE2 means for a pasted route: POSIX classes and Unicode classes work, `\\d` is ASCII only, and what
RE2 refuses is refused when the configuration is read, naming the route and the matcher.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from relay.cli import main
from relay.config.matchers import MatcherError, Op, parse_line, parse_matcher

EQ, NE, RE, NRE = Op.EQ, Op.NE, Op.RE, Op.NRE

# (input, [(name, op, value), ...]) from TestMatchers, names as paths.
PARSED: list[tuple[str, list[tuple[str, Op, str]]]] = [
    ("{}", []),
    ("{body.foo='}", [("body.foo", EQ, "'")]),
    ("{body.foo=`}", [("body.foo", EQ, "`")]),
    ('{body.foo=\\"}', [("body.foo", EQ, '"')]),
    ("{body.foo=bar}", [("body.foo", EQ, "bar")]),
    ('{body.foo="bar"}', [("body.foo", EQ, "bar")]),
    ("{body.foo=~bar.*}", [("body.foo", RE, "bar.*")]),
    ('{body.foo=~"bar.*"}', [("body.foo", RE, "bar.*")]),
    ("{body.foo!=bar}", [("body.foo", NE, "bar")]),
    ('{body.foo!="bar"}', [("body.foo", NE, "bar")]),
    ("{body.foo!~bar.*}", [("body.foo", NRE, "bar.*")]),
    ('{body.foo!~"bar.*"}', [("body.foo", NRE, "bar.*")]),
    ('{body.foo="bar", body.baz!="quux"}', [("body.foo", EQ, "bar"), ("body.baz", NE, "quux")]),
    ('{body.foo="bar", body.baz!~"quux.*"}', [("body.foo", EQ, "bar"), ("body.baz", NRE, "quux.*")]),
    (
        '{body.foo="bar",body.baz!~".*quux", body.derp="wat"}',
        [("body.foo", EQ, "bar"), ("body.baz", NRE, ".*quux"), ("body.derp", EQ, "wat")],
    ),
    (
        '{body.foo="bar", body.baz!="quux", body.derp="wat"}',
        [("body.foo", EQ, "bar"), ("body.baz", NE, "quux"), ("body.derp", EQ, "wat")],
    ),
    (
        '{body.foo="bar", body.baz!~".*quux.*", body.derp="wat"}',
        [("body.foo", EQ, "bar"), ("body.baz", NRE, ".*quux.*"), ("body.derp", EQ, "wat")],
    ),
    ('{body.foo="bar", body.instance=~"some-api.*"}', [("body.foo", EQ, "bar"), ("body.instance", RE, "some-api.*")]),
    ('{body.foo=""}', [("body.foo", EQ, "")]),
    ('{body.foo="bar,quux", body.job="job1"}', [("body.foo", EQ, "bar,quux"), ("body.job", EQ, "job1")]),
    ('{body.foo = "bar", body.dings != "bums", }', [("body.foo", EQ, "bar"), ("body.dings", NE, "bums")]),
    ("body.foo=bar,body.dings!=bums", [("body.foo", EQ, "bar"), ("body.dings", NE, "bums")]),
    (
        '{body.quote="She said: \\"Hi, ladies! That\'s gender-neutral…\\""}',
        [("body.quote", EQ, 'She said: "Hi, ladies! That\'s gender-neutral…"')],
    ),
    ('body.statuscode=~"5.."', [("body.statuscode", RE, "5..")]),
    ("body.tricky=~~~", [("body.tricky", RE, "~~")]),
    ('body.trickier==\\\\=\\=\\"', [("body.trickier", EQ, '=\\=\\="')]),
    (
        'body.contains_quote != "\\"" , body.contains_comma !~ "foo,bar" , ',
        [("body.contains_quote", NE, '"'), ("body.contains_comma", NRE, "foo,bar")],
    ),
    ("{body.foo=bar}}", [("body.foo", EQ, "bar}")]),
    ("{body.foo=bar}},}", [("body.foo", EQ, "bar}}")]),
    ("{body.foo=,body.bar=}}", [("body.foo", EQ, ""), ("body.bar", EQ, "}")]),
    ("{body.foo=bar\\t}", [("body.foo", EQ, "bar\\t")]),
    ("{body.foo=bar\\n}", [("body.foo", EQ, "bar\n")]),
    ("{body.foo=bar\\}", [("body.foo", EQ, "bar\\")]),
    ("{body.foo=bar\\\\}", [("body.foo", EQ, "bar\\")]),
    ('{body.foo=bar\\"}', [("body.foo", EQ, 'bar"')]),
    ("body.job=", [("body.job", EQ, "")]),
    ('{kind="x",}', [("kind", EQ, "x")]),  # a trailing comma, as both of Alertmanager's parsers take it
]

# Inputs TestMatchers expects an error for.
REFUSED = [
    ",",
    "{,}",
    'body.job="value',
    'body.job=value"',
    'body.trickier==\\\\=\\=\\""',
    'body.contains_unescaped_quote = foo"bar',
    '{body.foo=~"invalid[regexp"}',
    '"{body.foo=\\"bar"}',
    '"body.foo=\\"bar"',
    '"body.foo=\\"bar\\""',
    '"body.foo=\\"bar\\"',
    '"{body.foo=\\"bar\\"}"',
    '"body.foo="bar""',
    "{{body.foo=",
    # Braces around all or none, as Alertmanager's UTF-8 parser says (its classic one, which took these, is
    # the fallback it is leaving behind).
    "{body.foo=",
    "{body.foo=}b",
    'kind="x"}',
    '{kind="x"',
]


@pytest.mark.parametrize(("text", "expected"), PARSED)
def test_alertmanager_parse_cases(text: str, expected: list[tuple[str, Op, str]]) -> None:
    assert [(".".join(m.path), m.op, m.value) for m in parse_line(text)] == expected


@pytest.mark.parametrize("text", REFUSED)
def test_alertmanager_parse_error_cases(text: str) -> None:
    with pytest.raises(MatcherError):
        parse_line(text)


# (op, matcher value, label value, matches) from TestMatcher.
MATCHING = [
    (EQ, "bar", "bar", True),
    (EQ, "bar", "foo-bar", False),
    (NE, "bar", "bar", False),
    (NE, "bar", "foo-bar", True),
    (RE, "bar", "bar", True),
    (RE, "bar", "foo-bar", False),
    (RE, ".*bar", "foo-bar", True),
    (NRE, "bar", "bar", False),
    (NRE, "bar", "foo-bar", True),
    (NRE, ".*bar", "foo-bar", False),
    (RE, "foo.bar", "foo-bar", True),
    (RE, "foo\\.bar", "foo-bar", False),
    (RE, "foo\\.bar", "foo.bar", True),
    (EQ, "foo\nbar", "foo\nbar", True),
    (RE, "foo.bar", "foo\nbar", False),
    (RE, "(?s)foo.bar", "foo\nbar", True),
    (EQ, '~!="', '~!="', True),
]


def matcher(op: Op, value: str) -> str:
    quoted = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'body.v{op.value}"{quoted}"'


@pytest.mark.parametrize(("op", "value", "label", "expected"), MATCHING)
def test_alertmanager_matching_cases(op: Op, value: str, label: str, expected: bool) -> None:
    m = parse_matcher(matcher(op, value))
    assert (m.op, m.value) == (op, value)
    assert m.matches({"body": {"v": label}}) is expected


# --- RE2, as Alertmanager's Go regexps --------------------------------------------------------------

RE2_MATCHES = [
    ("[[:digit:]]+", "123", True),  # a POSIX class: Python's re reads it as a set of characters, never digits
    ("[[:alpha:]][[:alnum:]_]*", "eu_west1", True),
    ("\\pL+", "Zürich", True),  # Unicode classes
    ("\\p{Greek}+", "αβγ", True),
    ("\\d+", "٣", False),  # \d is ASCII digits only, as in Go
    ("\\d+", "3", True),
    ("\\w+", "é", False),  # and \w ASCII word characters
    ("(?i)PROD", "prod", True),
    ("a|b", "ab", False),  # the whole value, as ^(?:a|b)$
    ("\\Qa.b\\E", "a.b", True),
    ("\\Qa.b\\E", "axb", False),
]


@pytest.mark.parametrize(("regex", "value", "expected"), RE2_MATCHES)
def test_regexes_are_re2(regex: str, value: str, expected: bool) -> None:
    assert parse_matcher(matcher(RE, regex)).matches({"body": {"v": value}}) is expected


@pytest.mark.parametrize(
    "regex",
    [
        "(?=a)a",  # look-ahead
        "(?<!a)b",  # look-behind
        "(a)\\1",  # backreference
        "a++",  # possessive
        "(?P=x)",
    ],
)
def test_what_re2_refuses_is_refused(regex: str) -> None:
    with pytest.raises(MatcherError, match="not valid \\(RE2\\)"):
        parse_matcher(matcher(RE, regex))


def test_relay_check_refuses_a_pattern_re2_refuses_naming_route_and_matcher(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "channels:\n  ops: {url: 'json://localhost:9/hook'}\n"
        "routes:\n  - name: not-staging\n    channels: [ops]\n"
        "    matchers: ['kind=~\"notification:.*\"', 'body.env=~\"(?!staging).*\"']\n",
        encoding="utf-8",
    )
    assert main(["check", "--config", str(config)]) != 0
    err = capsys.readouterr().err
    assert "routes[0].matchers[1]" in err and "route 'not-staging'" in err
    assert 'body.env=~"(?!staging).*"' in err and "not valid (RE2)" in err
