"""The outage rules (relay.outages.model): pure, no Redis."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from relay.core.outcome import Delivered, Permanent, Transient
from relay.outages.model import (
    MAX_PROBE,
    OK,
    PERMANENT,
    TRANSIENT,
    down_reason,
    held_by_outage,
    kind_of,
    p95,
    probe_schedule,
)

pytestmark = pytest.mark.dated


def test_probes_double_up_to_ten_minutes() -> None:
    assert probe_schedule(30) == [30, 60, 120, 240, 480, 600]
    assert probe_schedule(600) == [600] and probe_schedule(1)[-1] == MAX_PROBE


def test_only_transient_failures_count_toward_an_outage() -> None:
    assert kind_of(Delivered()) == OK
    assert kind_of(Transient("HTTP 503", status=503)) == TRANSIENT
    assert kind_of(Permanent("HTTP 404", status=404)) == PERMANENT


def test_a_held_delivery_says_since_when_and_why() -> None:
    since = datetime(2026, 11, 26, 9, 0, tzinfo=UTC).timestamp()
    reason = down_reason(since, "HTTP 503")
    assert reason == "channel down since 2026-11-26T09:00:00.000Z: HTTP 503"
    assert held_by_outage(reason)
    assert not held_by_outage(None) and not held_by_outage("quiet hours")


def test_p95_is_the_bucket_bound_that_holds_it() -> None:
    bounds = [0.1, 1.0, 10.0]
    assert p95(bounds, [0, 0, 0, 0]) is None
    assert p95(bounds, [95, 5, 0, 0]) == 0.1
    assert p95(bounds, [94, 6, 0, 0]) == 1.0
    assert p95(bounds, [0, 0, 0, 3]) == 10.0  # above the last bound: at least that
