"""The commands under test build their own runtime, on the wall clock (as `relay` does): the test's runtime,
which accepts and works beside them, runs on the wall clock's pace too (and can still be moved)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from relay.core.clock import ManualClock, system_clock
from relay.runtime.bootstrap import Runtime


@pytest.fixture
def rt(make_runtime: Callable[..., Runtime]) -> Runtime:
    return make_runtime(clock=ManualClock(system_clock(), base=system_clock))
