"""What the delivery stages are handed: the process's config, its stores on Redis, the intake (RQ), the
renderer, the senders, the catalog and the clock, built once by the runtime's bootstrap. Delivery code takes
them as a parameter and never imports the runtime (tests/test_layering.py).

RQ calls a job by its function's name with the job's arguments alone, so the job functions
(`relay.delivery.jobs`) find the context that the worker's bootstrap bound here, once per process: the one
place where RQ calls in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from redis import Redis

from relay.config import Config
from relay.core.rendering import Renderer
from relay.delivery.catalog import Catalog
from relay.delivery.sender import Sender
from relay.storage.queue import Intake
from relay.storage.store import Store


class Context(Protocol):
    config: Config
    redis: Redis
    store: Store
    intake: Intake
    renderer: Renderer
    sender: Sender
    catalog: Catalog | None

    @property
    def clock(self) -> Callable[[], float]:
        """What the delivery stages ask the time (quiet hours, digest windows): a test may hand in its own."""
        ...

    @property
    def name(self) -> str:
        """This process, as RQ, the leases and the heartbeats name it."""
        ...


_bound: Context | None = None


def bind(context: Context) -> Context:
    """Make `context` what the jobs of this process run with (the worker's bootstrap calls this)."""
    global _bound
    _bound = context
    return context


def bound() -> Context:
    if _bound is None:
        raise RuntimeError("relay's jobs run in `relay worker` (or `relay serve`), which binds their context")
    return _bound
