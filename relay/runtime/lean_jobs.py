"""relay's own RQ jobs started and ended in one round trip each, leaving in Redis what RQ's would.

RQ spends about a dozen round trips and much Python on the bookkeeping of one job: two pipelines to
start it (execution, registries, worker and job state), a heartbeat after it, then a WATCH for
dependents and reads of the job's status and executions to delete it. relay's own jobs have no
dependents, callbacks on success, results, groups, repeats or rate limits, so each start is one script
and each successful end another, writing the same keys and fields as RQ 3.0's own path (the tests
compare both). Any other job, and every failure, keeps RQ's path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import uuid4

from rq.executions import Execution
from rq.job import Job, JobStatus
from rq.registry import StartedJobRegistry
from rq.results import Result
from rq.utils import current_timestamp, utcformat
from rq.worker import WorkerStatus

from relay.delivery.jobs import prefetch
from relay.storage.queue import DELIVER_JOB, PLAN_JOB
from relay.storage.store import event_from_hash, event_key, hash_pairs

if TYPE_CHECKING:
    from redis import Redis
    from rq import Queue
    from rq.worker import BaseWorker

RELAY_JOBS = frozenset({PLAN_JOB, DELIVER_JOB})

# RQ's prepare_execution (Execution.create, worker state busy) and prepare_job_execution (worker and job
# heartbeats, job started, off the intermediate queue), in RQ's order; then a planning job's event.
_START = """
local ttl = tonumber(ARGV[5])
local now = tonumber(ARGV[6])
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'job_id', ARGV[2], 'created_at', ARGV[3], 'last_heartbeat', ARGV[3],
           'worker_name', ARGV[4])
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('ZADD', KEYS[2], now + ttl + 60, ARGV[1])
redis.call('EXPIRE', KEYS[2], ttl + 60)
redis.call('ZADD', KEYS[3], now + ttl, ARGV[8])
redis.call('SADD', KEYS[4], ARGV[8])
redis.call('EXPIRE', KEYS[4], ttl + 60)
redis.call('HSET', KEYS[5], 'state', ARGV[9], 'last_heartbeat', ARGV[7])
redis.call('EXPIRE', KEYS[5], ttl)
redis.call('EXPIRE', KEYS[4], ttl)
redis.call('HSET', KEYS[6], 'last_heartbeat', ARGV[7], 'status', ARGV[10], 'started_at', ARGV[7],
           'worker_name', ARGV[4])
redis.call('PERSIST', KEYS[6])
if KEYS[7] ~= '' then redis.call('LREM', KEYS[7], 1, ARGV[2]) end
if KEYS[8] ~= '' then return redis.call('HGETALL', KEYS[8]) end
return false
"""

# RQ's handle_job_success for result_ttl 0: counters, the execution and the job deleted, worker idle.
_FINISH = """
redis.call('HINCRBY', KEYS[1], 'successful_job_count', 1)
redis.call('HINCRBYFLOAT', KEYS[1], 'total_working_time', ARGV[2])
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('SREM', KEYS[4], ARGV[1])
redis.call('DEL', KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9])
redis.call('HSET', KEYS[1], 'state', ARGV[3])
return 1
"""


def plain(job: Job, default_result_ttl: int) -> bool:
    """A job of relay's own whose success RQ would simply delete."""
    return (
        job.func_name in RELAY_JOBS
        and job.get_result_ttl(default_result_ttl) == 0
        and job.success_callback is None
        and not job.group_id
        and not job.has_rate_limit
        and not job.repeats_left
        and not job._dependency_ids
    )


class Scripts:
    """The start and finish scripts, registered on a worker's connection (redis-py sends EVALSHA, and the
    source again on NOSCRIPT)."""

    def __init__(self, connection: Redis) -> None:
        self._start = connection.register_script(_START)
        self._finish = connection.register_script(_FINISH)

    def start(self, worker: BaseWorker, job: Job, queue: Queue, ttl: int) -> Execution:
        """RQ's `prepare_execution` and `prepare_job_execution` in one script; a planning job's event is
        read in it too and handed to the job (`relay.delivery.jobs.prefetch`)."""
        execution = Execution(id=uuid4().hex, job_id=job.id, connection=worker.connection, worker_name=worker.name)
        execution._job = job
        at = execution.created_at
        execution.last_heartbeat = at
        event_id = job.args[0] if job.func_name == PLAN_JOB and job.args else None
        reply = self._start(
            keys=[
                execution.key,
                job.execution_registry.key,
                job.started_job_registry.key,
                execution.worker_executions_key,
                worker.key,
                job.key,
                queue.intermediate_queue_key if len(worker.queues) == 1 else "",
                event_key(event_id) if isinstance(event_id, str) else "",
            ],
            args=[
                execution.id,
                job.id,
                at.timestamp(),
                worker.name,
                ttl,
                current_timestamp(),
                utcformat(at),
                execution.composite_key,
                WorkerStatus.BUSY.value,
                JobStatus.STARTED.value,
            ],
        )
        worker.executions[execution.id] = execution
        worker._state = WorkerStatus.BUSY
        worker.last_heartbeat = at
        job.worker_name = worker.name
        job.last_heartbeat = job.started_at = at
        job._status = JobStatus.STARTED
        if isinstance(event_id, str):
            prefetch(event_id, event_from_hash(hash_pairs(reply)))
        return execution

    def finish(self, worker: BaseWorker, job: Job, registry: StartedJobRegistry, execution: Execution) -> None:
        """What RQ's success handling writes for a job with result_ttl 0, in one script. No read is
        needed: the execution is the one `start` made."""
        assert job.started_at is not None and job.ended_at is not None
        self._finish(
            keys=[
                worker.key,
                execution.key,
                registry.key,
                execution.worker_executions_key,
                job.key,
                job.dependents_key,
                job.dependencies_key,
                Result.get_key(job.id),  # type: ignore[no-untyped-call]
                job.execution_registry.key,
            ],
            args=[execution.composite_key, (job.ended_at - job.started_at).total_seconds(), WorkerStatus.IDLE.value],
        )
        worker.executions.pop(execution.id, None)
        worker._state = WorkerStatus.IDLE
        job._status = JobStatus.FINISHED
