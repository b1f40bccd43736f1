"""How RQ's jobs find their worker's runtime: the worker's RQ job class hands it in (`relay.delivery.context`).
This stands on RQ calling a job through `Job.func` with the job's own arguments after: it breaks when RQ
changes that."""

from __future__ import annotations

from redis import Redis
from rq import Queue, SimpleWorker

from relay.delivery.context import Context
from relay.runtime.bootstrap import Runtime
from relay.runtime.worker import make_worker
from relay.storage.work_queue import QUEUE_NAME, WORK_JOB


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


def test_a_plain_rq_worker_is_told_to_run_relay_worker(rt: Runtime, redis: Redis) -> None:
    """RQ's own worker on relay's queue runs the wake-up job without relay's runtime: the job fails saying
    which command runs it (an arrival's job has the eventId as its argument, a scheduled one none)."""
    queue = Queue(QUEUE_NAME, connection=redis)
    jobs = [queue.enqueue_call(WORK_JOB, args=("evt-1",)), queue.enqueue_call(WORK_JOB)]
    SimpleWorker([queue], connection=redis).work(burst=True, with_scheduler=False)
    for job in jobs:
        job.refresh()
        result = job.latest_result()
        assert job.is_failed and result is not None
        assert "RuntimeError" in str(result.exc_string) and "`relay worker` or `relay serve`" in str(result.exc_string)
