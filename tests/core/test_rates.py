"""Channel rates and Retry-After values."""

from __future__ import annotations

import pytest

from relay.config import parse_rate
from relay.delivery.apprise_compat import MAX_WAIT
from relay.delivery.apprise_compat import parse_retry_after as parse


@pytest.mark.parametrize(
    ("text", "per_second"),
    [("1/s", 1.0), ("20/m", 20 / 60), ("100/h", 100 / 3600), (" 2 / sec ", 2.0), ("0.5/s", 0.5), (3, 3.0)],
)
def test_rates(text: str | int, per_second: float) -> None:
    assert parse_rate(text) == pytest.approx(per_second)


@pytest.mark.parametrize("text", ["0/s", "fast", "1/d", "-1/s", "1", 0, -2])
def test_bad_rates(text: str | int) -> None:
    with pytest.raises(ValueError):
        parse_rate(text)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("120", 120.0), ("0", 0.0), (" 7 ", 7.0), ("99999999", MAX_WAIT), (None, None), ("", None), ("soon", None)],
)
def test_retry_after_seconds(value: str | None, seconds: float | None) -> None:
    assert parse(value) == seconds


def test_retry_after_http_date() -> None:
    now = 1_800_000_000.0  # 2027-01-15T08:00:00Z
    assert parse("Fri, 15 Jan 2027 08:00:30 GMT", now=now) == pytest.approx(30.0)
    assert parse("Fri, 15 Jan 2027 07:59:00 GMT", now=now) == 0.0
