"""The commands under test build their own runtime, on the wall clock (as `relay` does): the test's runtimes,
which accept and work beside them, run at the wall clock's pace too (and can still be moved)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from relay.core.clock import Clock, system_clock
from relay.runtime.bootstrap import Runtime
from tests.clock import ManualClock


@pytest.fixture
def make_runtime(make_runtime: Callable[..., Runtime]) -> Callable[..., Runtime]:
    made = make_runtime

    def make(clock: Clock | None = None, **extra: Any) -> Runtime:
        return made(clock=clock if clock is not None else ManualClock(system_clock(), base=system_clock), **extra)

    return make
