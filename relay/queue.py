"""RQ adapter: durable intake with dedup, delivery jobs, retries with backoff, replay."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from redis import Redis
from redis.exceptions import RedisError, WatchError
from rq import Queue, Retry

from relay.model import State
from relay.store import METRICS, DeliveryRecord, Store, dedup_key, metric_field, now

QUEUE_NAME = "relay"
PLAN_JOB = "relay.jobs.plan_job"
DELIVER_JOB = "relay.jobs.deliver_job"
# RQ-level retries only cover a crashed or killed worker; send failures are retried by relay itself.
# No interval: a job found abandoned goes straight back to the queue, with no wait on a scheduler.
CRASH_RETRY = Retry(max=3)
# RQ declares a job abandoned once its timeout plus 60 s have passed since its start: keep the timeout
# short so that a delivery whose worker was killed is retried within about two minutes.
JOB_MARGIN = 20


class QueueUnavailable(Exception):
    """Redis could not be reached or did not confirm the write; nothing was accepted."""


def job_id(prefix: str, ident: str, attempt: int | None = None) -> str:
    # RQ ids allow letters, digits, '_' and '-': ours are hashes, so they always fit.
    return f"relay-{prefix}-{ident}" + (f"-{attempt}" if attempt is not None else "")


@dataclass
class Intake:
    redis: Redis
    store: Store
    queue: Queue
    dedup_ttl: float
    job_timeout: int

    @classmethod
    def create(cls, redis: Redis, store: Store, dedup_ttl: float, send_timeout: float) -> Intake:
        timeout = int(send_timeout) + JOB_MARGIN
        return cls(redis, store, Queue(QUEUE_NAME, connection=redis), dedup_ttl, timeout)

    def accept(self, event_id: str, kind: str, payload: str) -> str:
        """'accepted' once the event and its planning job are in Redis, in one transaction; else 'duplicate'."""
        try:
            with self.redis.pipeline(transaction=True) as pipe:
                for _ in range(5):
                    try:
                        pipe.watch(dedup_key(event_id))  # type: ignore[no-untyped-call]
                        if pipe.exists(dedup_key(event_id)):
                            pipe.unwatch()
                            self.redis.hincrby(METRICS, metric_field("relay_notifications_duplicate_total"), 1)
                            return "duplicate"
                        pipe.multi()
                        self.store.add_event(pipe, event_id, kind, payload, self.dedup_ttl)
                        self.queue.enqueue_call(
                            PLAN_JOB,
                            args=(event_id,),
                            job_id=job_id("plan", _hash(event_id)),
                            result_ttl=0,
                            failure_ttl=self.store.retention,
                            timeout=self.job_timeout,
                            retry=CRASH_RETRY,
                            pipeline=pipe,
                        )
                        pipe.execute()
                        return "accepted"
                    except WatchError:
                        continue
                    finally:
                        pipe.reset()
            return "duplicate"
        except RedisError as exc:
            raise QueueUnavailable(type(exc).__name__) from exc

    def enqueue_deliveries(self, ids: list[str]) -> None:
        if not ids:
            return
        jobs = [
            Queue.prepare_data(
                DELIVER_JOB,
                args=(i,),
                job_id=job_id("deliver", i, int(now() * 1000)),
                result_ttl=0,
                failure_ttl=self.store.retention,
                timeout=self.job_timeout,
                retry=CRASH_RETRY,
            )
            for i in ids
        ]
        self.queue.enqueue_many(jobs)

    def retry_later(self, delivery_id: str, delay: float, attempt: int) -> None:
        self.queue.enqueue_in(
            timedelta(seconds=delay),
            DELIVER_JOB,
            delivery_id,
            job_id=job_id("deliver", delivery_id, attempt),
            result_ttl=0,
            failure_ttl=self.store.retention,
            job_timeout=self.job_timeout,
            retry=CRASH_RETRY,
        )

    def replay(self, records: list[DeliveryRecord], attempts: int, dry_run: bool = False) -> int:
        """Requeue failed deliveries with a fresh retry budget; delivered ones are never touched."""
        chosen = [r for r in records if r.state == State.FAILED.value]
        if dry_run or not chosen:
            return len(chosen)
        for record in chosen:
            previous = record.state
            record.state = State.QUEUED.value
            record.maxAttempts = record.attempts + attempts
            record.lastError = (record.lastError or "") and f"replayed after: {record.lastError}"
            self.store.update(record, previous)
        self.redis.hincrby(METRICS, metric_field("relay_replays_total"), len(chosen))
        self.enqueue_deliveries([r.id for r in chosen])
        return len(chosen)


def _hash(value: str) -> str:
    import hashlib

    return hashlib.sha256(value.encode()).hexdigest()[:32]
