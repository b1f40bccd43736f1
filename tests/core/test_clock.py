"""The one clock (`relay.core.clock`): the wall clock read in one place, and the clock the tests move."""

from __future__ import annotations

import re
from pathlib import Path

from relay.core.clock import system_clock
from tests.clock import ManualClock

RELAY = Path(__file__).resolve().parent.parent.parent / "relay"


def test_the_wall_clock_is_read_in_one_place() -> None:
    readers = sorted(
        str(path.relative_to(RELAY))
        for path in RELAY.rglob("*.py")
        if re.search(r"\btime\.time\(|from time import time\b", path.read_text())
    )
    assert readers == ["core/clock.py"]


def test_a_manual_clock_stands_still_until_moved() -> None:
    clock = ManualClock(1_800_000_000.0)
    assert clock() == clock() == 1_800_000_000.0
    assert clock.advance(90) == 1_800_000_090.0 == clock()
    clock.set(1_700_000_000.0)
    assert clock() == 1_700_000_000.0


def test_a_manual_clock_on_a_base_goes_on_at_its_pace_from_where_it_is_moved() -> None:
    base = ManualClock(100.0)
    clock = ManualClock(5_000.0, base=base)
    assert clock() == 5_000.0
    base.advance(2.5)
    assert clock() == 5_002.5
    clock.advance(60)
    assert clock() == 5_062.5
    clock.set(10.0)
    base.advance(1)
    assert clock() == 11.0
    assert abs(ManualClock(0.0, base=system_clock)()) < 1.0
