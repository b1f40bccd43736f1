"""A value a thread sets for the length of a block, the outer one back after it (blocks may nest)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def scoped(local: threading.local, name: str, value: T) -> Iterator[T]:
    outer = getattr(local, name, None)
    setattr(local, name, value)
    try:
        yield value
    finally:
        setattr(local, name, outer)
