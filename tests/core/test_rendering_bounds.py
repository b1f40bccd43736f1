"""Template expressions that would build huge strings are refused; ordinary formatting still works."""

from __future__ import annotations

import pytest

from relay.core.limits import RenderError
from relay.core.sandbox import make_environment

ENV = make_environment(None)


@pytest.mark.parametrize(
    "source",
    [
        "{{ 'x' * 10**9 }}",
        "{{ [1] * 10**9 }}",
        "{{ 'x'.center(10**9) }}",
        "{{ 'x'.ljust(10**9) }}",
        "{{ '1'.zfill(10**9) }}",
        "{{ '%0*d' % (10**9, 0) }}",
        "{{ '%01000000000d' % 0 }}",
        "{{ '%0*d'|format(10**9, 0) }}",
        "{{ '{:>1000000000}'.format(1) }}",
        "{{ '{:>{w}}'.format(1, w=10**9) }}",
        "{{ '{0:>{1}}'.format(1, 10**9) }}",
        "{{ 2 ** 10000 }}",
        # Each built hundreds of millions of characters, or more, before it was refused.
        "{{ 'x'|center(300000000) }}",
        "{{ 'a\\nb'|indent(10**8) }}",
        "{{ 'a\\nb'|indent('y' * 100000) }}",
        "{{ '{0:{1}}'.format('x', '>100000000') }}",
        "{{ '{:.100000000f}'.format(1.5) }}",
        "{{ '{0}{0}{0}'.format('x' * 100000) }}",
        "{{ (['x' * 100000] * 100000)|string }}",
        "{{ (['x' * 100000] * 100000)|tojson }}",
        "{{ (['x' * 100000] * 100000)|join }}",
        "{{ (['x' * 100000] * 100000) ~ '' }}",
        "{{ ['x' * 100000] * 100000 }}",
        "{{ 'y'.join(['x' * 100000] * 100000) }}",
        "{{ ('a' * 100000)|replace('', 'y' * 1000) }}",
        "{{ ('a' * 100000).replace('a', 'y' * 1000) }}",
        "{{ ('ab' * 50000)|wordwrap(1, wrapstring='x' * 10000) }}",
        "{{ ('\\t' * 100000).expandtabs(1000) }}",
        "{{ ('a' * 100000).translate({97: 'bbbb'}) }}",
        "{{ ('%s' * 100000) % (('x' * 100000,) * 100000) }}",
        "{{ ('x' * 100000) + ('x' * 100000) + 'x' }}",
        "{{ lipsum(100000) }}",
        "{{ [1]|batch(10**9, 'x')|list }}",
        "{{ [[1], [2]]|sum(start=[]) }}",
        "{% set x %}{% for i in range(3) %}{{ 'x' * 100000 }}{% endfor %}{% endset %}{{ x|length }}",
    ],
)
def test_huge_values_are_refused(source: str) -> None:
    with pytest.raises(RenderError):
        ENV.from_string(source).render()


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{ '%d'|format(10**9) }}", "1000000000"),
        ("{{ '%s' % 10**9 }}", "1000000000"),
        ("{{ '{:,}'.format(10**12) }}", "1,000,000,000,000"),
        ("{{ 'ab'.center(6) }}", "  ab  "),
        ("{{ '%05d' % 42 }}", "00042"),
        ("{{ '%s-%s'|format(1, 2) }}", "1-2"),
        ("{{ 7 % 3 }}", "1"),
        ("{{ '{:>5}'.format('a') }}", "    a"),
        ("{{ '-' * 20 }}", "-" * 20),
        ("{{ 'ab'|center(6) }}", "  ab  "),
        ("{{ 'a\\nb'|indent(2) }}", "a\n  b"),
        ("{{ '{0:>{1}}'.format('a', 3) }}", "  a"),
        ("{{ ['a', 'b']|join(', ') }}", "a, b"),
        ("{{ 'a-b'|replace('-', '+') }}", "a+b"),
        ("{{ 'a' ~ 1 ~ 'b' }}", "a1b"),
        ("{{ 'a' + 'b' }}", "ab"),
        ("{{ [1, 2] + [3] }}", "[1, 2, 3]"),
        ("{{ [1, 2, 3]|sum }}", "6"),
        ("{{ ('x' * 1000)|wordwrap(500)|length }}", "1001"),
        ("{% set x %}{{ 'x' * 1000 }}{% endset %}{{ x|length }}", "1000"),
        ("{% macro m(s) %}[{{ s }}]{% endmacro %}{{ m('a') }}", "[a]"),
    ],
)
def test_ordinary_formatting_still_works(source: str, expected: str) -> None:
    assert ENV.from_string(source).render() == expected
