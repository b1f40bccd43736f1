"""How RQ's jobs find their worker's runtime: the worker's RQ job class hands it in (`relay.delivery.context`).
This stands on RQ calling a job through `Job.func` with the job's own arguments after: it breaks when RQ
changes that."""

from __future__ import annotations

from redis import Redis
from rq import Queue

from relay.delivery.context import Context
from relay.runtime.bootstrap import Runtime
from relay.runtime.worker import make_worker
from relay.storage.queue import QUEUE_NAME


def named(rt: Context, suffix: str, *, sep: str = "") -> str:
    """A job for RQ's own worker: which runtime it ran with, and its arguments."""
    return f"{rt.name}{sep}{suffix}"


def test_a_worker_hands_its_jobs_its_runtime_before_their_arguments(rt: Runtime, redis: Redis) -> None:
    job = Queue(QUEUE_NAME, connection=redis).enqueue(named, "x", sep="/")
    make_worker(rt, redis).work(burst=True, with_scheduler=False)
    job.refresh()
    assert job.return_value() == f"{rt.name}/x"


def test_a_job_fetched_outside_a_worker_is_rqs_own(rt: Runtime, redis: Redis) -> None:
    """Only a worker's job class carries a runtime: what the API reads of RQ's jobs is RQ's own."""
    job = Queue(QUEUE_NAME, connection=redis).enqueue(named, "x")
    fetched = Queue(QUEUE_NAME, connection=redis).fetch_job(job.id)
    assert fetched is not None and fetched.func is named
