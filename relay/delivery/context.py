"""What the delivery stages are handed: the process's config, its stores on Redis, the intake (RQ), the
renderer, the senders, the catalog and the clock, built once by the runtime's bootstrap. Delivery code takes
them as a parameter and never imports the runtime (tests/test_layering.py).

RQ calls a job by its function's name with the job's arguments; a worker's RQ runs its jobs through
`job_class(context)` (RQ's `job_class` option), which hands them the context as their first argument: the
one place where RQ calls in, and no module holds the context.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

from redis import Redis
from rq.job import Job

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

    @property
    def linger(self) -> float:
        """How long (seconds) a wake-up job with nothing left to do listens for more before it ends; 0: it
        ends at once (`relay worker --burst`, the tests that run jobs in process)."""
        ...

    def stop_requested(self) -> bool:
        """Whether this worker was asked to stop (a lingering job then ends)."""
        ...


def job_class(context: Context) -> type[Job]:
    """The RQ job class of a worker whose jobs run with `context`: RQ resolves a job's function by its name
    (`Job.func`), and this class hands it `context` first, then the job's own arguments."""

    class WithContext(Job):
        @property
        def func(self) -> Callable[..., Any] | None:
            found: Callable[..., Any] | None = super().func
            return functools.partial(found, context) if found is not None else None

    return WithContext
