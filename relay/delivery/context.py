"""What the delivery stages are handed: the process's config with what is built from it (`Loaded`), its stores on
Redis, the work queue (RQ), the senders and the clock, built once by the runtime's bootstrap; delivery code never
imports the runtime (tests/test_layering.py). A reload swaps the whole `Loaded` in one assignment; a unit of work
runs on `pinned()`, which reads it once, so its config, renderer and catalog are of one load. A worker's RQ runs its
jobs through `job_class(context)`, which hands them the context first: the one place where RQ calls in."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from redis import Redis
from rq.job import Job

from relay.config import Config
from relay.core.rendering import Renderer
from relay.delivery.catalog import Catalog
from relay.delivery.sender import Sender
from relay.storage.store import Store
from relay.storage.work_queue import WorkQueue
from relay.tracing import Tracer


@dataclass(frozen=True)
class Loaded:
    """The config and what is built from it (`catalog`: None without a platform URL)."""

    config: Config
    renderer: Renderer
    catalog: Catalog | None


class Context(Protocol):
    redis: Redis
    store: Store
    work: WorkQueue
    sender: Sender
    tracer: Tracer  # this process's (off unless tracing is on), built with the process

    @property
    def config(self) -> Config: ...

    @property
    def renderer(self) -> Renderer: ...

    @property
    def catalog(self) -> Catalog | None: ...

    def pinned(self) -> Context: ...

    @property
    def clock(self) -> Callable[[], float]:
        """The one clock of every time stored or compared (`relay.core.clock`)."""
        ...

    @property
    def name(self) -> str: ...


def job_class(context: Context) -> type[Job]:
    """RQ resolves a job's function by its name (`Job.func`); this class hands it `context` first."""

    class WithContext(Job):
        @property
        def func(self) -> Callable[..., Any] | None:
            found: Callable[..., Any] | None = super().func
            return functools.partial(found, context) if found is not None else None

    return WithContext
