"""Template expressions that would build huge strings are refused; ordinary formatting still works."""

from __future__ import annotations

import pytest

from relay.core.rendering import RenderError, make_environment

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
    ],
)
def test_ordinary_formatting_still_works(source: str, expected: str) -> None:
    assert ENV.from_string(source).render() == expected
