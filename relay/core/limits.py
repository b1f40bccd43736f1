"""What one template render may spend (docs/templates.md, "Limits"): a deadline that stops a running
template, a size for any one value it builds, and a budget of characters for everything it builds.

Only a loop or a call can keep a template busy, so the deadline is checked there: every item of a `{% for %}`
loop comes through `ticking` (the sandbox compiles loops so), and every call a template makes (a macro, a
method) through `tick`. C code (`str.center`, `"".join`) cannot be interrupted, which is why what builds
strings is bounded before it runs (`relay.core.sandbox`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

MAX_VALUE = 200_000  # characters (or items) of any one value a template builds: what a delivery's body may have
MAX_BUILT = 5_000_000  # characters one render may build and output in all
MAX_WIDTH = 100_000  # a width, precision, count or exponent a template may ask for
RENDER_SECONDS = 2.0

_SMALL = 32  # what a number (or another object) costs as text, roughly


class RenderError(Exception):
    pass


class LimitExceeded(RenderError):
    """A template asked for more than a render may spend: it falls back like any broken template."""


@dataclass
class _Render:
    deadline: float
    seconds: float
    left: int
    ticks: int = 0


_local = threading.local()


def charge(size: int, what: str = "a value") -> None:
    """Count `size` characters a template is about to build (or has built) against the limits."""
    if size > MAX_VALUE:
        raise LimitExceeded(f"{what} of more than {MAX_VALUE:,} characters")
    current: _Render | None = getattr(_local, "render", None)
    if current is not None:
        current.left -= size
        if current.left < 0:
            raise LimitExceeded(f"the template built more than {MAX_BUILT:,} characters")


def size_of(value: Any, cap: int = MAX_VALUE) -> int:
    """About how many characters `value` takes as text, counted only up to a little over `cap` (linear in
    what it counts, so a list holding one long string many times is not written out to be measured)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        parts: Any = (p for kv in value.items() for p in kv)
    elif isinstance(value, list | tuple | set | frozenset):
        parts = iter(value)
    else:
        return _SMALL
    total = 2
    for part in parts:
        total += 2 + size_of(part, cap - total)
        if total > cap:
            break
    return total


def check_width(value: Any, what: str = "width") -> None:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_WIDTH:
        raise LimitExceeded(f"{what} too large (more than {MAX_WIDTH:,})")


def tick() -> None:
    """One step of a loop or one call: past the deadline, the render stops (the clock is read every 64th)."""
    current: _Render | None = getattr(_local, "render", None)
    if current is None:
        return
    current.ticks += 1
    if current.ticks & 63 == 0 and time.monotonic() > current.deadline:
        raise LimitExceeded(f"rendering took longer than {current.seconds:g}s")


def ticking(items: Iterable[Any]) -> Iterator[Any]:
    """The items of a template's loop, stopped at the render's deadline."""
    for item in items:
        tick()
        yield item


@contextmanager
def limited(seconds: float = RENDER_SECONDS, built: int = MAX_BUILT) -> Iterator[None]:
    """Run a render under the limits. A render inside another one (a digest's item) runs under the outer one's."""
    if getattr(_local, "render", None) is not None:
        yield
        return
    _local.render = _Render(time.monotonic() + seconds, seconds, built)
    try:
        yield
    finally:
        _local.render = None
