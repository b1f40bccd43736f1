"""RQ adapter: the intake (dedup, event and its place to plan, in one round trip), deliveries made due and the
wake-up jobs RQ runs for them: RQ carries wake-ups only (`relay.storage.leases` says who owns what)."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any
from weakref import WeakKeyDictionary

from redis.asyncio import Redis as AsyncRedis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError, ResponseError
from rq import Queue
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from relay.storage.leases import UNPLANNED, WAKE, WAKE_TTL
from relay.storage.records import RECEIVED, event_key, metric_field, millis
from relay.storage.scripts import ACCEPT
from relay.storage.store import Store

QUEUE_NAME = "relay"
# The one job relay queues: wake a worker to take the work that is due (`relay.delivery.jobs.work`).
WORK_JOB = "relay.delivery.jobs.work"
# A wake-up takes and hands over due work for up to a couple of seconds; the sending happens beside it.
JOB_TIMEOUT = 60
# A finished job's hash is kept this long (RQ's result_ttl): with 0, RQ deletes the job at once, which
# costs about a dozen more round trips per job (a look through every registry and execution) than
# letting the hash expire.
RESULT_TTL = 10
log = logging.getLogger("relay.intake")


class QueueUnavailable(Exception):
    """Redis could not be reached or did not confirm the write; nothing was accepted."""


class NotReplicated(QueueUnavailable):
    """Too few replicas acknowledged within `redis.replica_timeout`: no 202 (a failover could lose it); the
    platform's retry is a duplicate, answered 202 once they do. `counted`: the count taken back."""

    def __init__(self, message: str, counted: str) -> None:
        super().__init__(message)
        self.counted = counted


def job_id(prefix: str, ident: str) -> str:
    # RQ ids allow letters, digits, '_' and '-': ours are hashes and numbers, so they always fit.
    return f"relay-{prefix}-{ident}"


def wake_job_id(event_id: str) -> str:
    return job_id("plan", hashlib.sha256(event_id.encode()).hexdigest()[:32])


@dataclass(frozen=True)
class Acceptance:
    """`accepted` or `duplicate`, and the wake-up job to enqueue (its flag set by the script), if any."""

    status: str
    wake_job: str | None = None


@dataclass
class WorkQueue:
    store: Store
    dedup_ttl: float
    # `redis.min_replicas` and `redis.replica_timeout` (seconds): see `replicated`.
    min_replicas: int = 0
    replica_timeout: float = 1.0
    # redis-py's own script objects (one a connection): EVALSHA, and the script loaded again when a restarted
    # Redis forgot it.
    _async_scripts: WeakKeyDictionary[AsyncRedis, AsyncScript] = field(
        init=False, repr=False, default_factory=WeakKeyDictionary
    )

    def __post_init__(self) -> None:
        self.redis = self.store.redis
        self.queue = Queue(QUEUE_NAME, connection=self.redis)

    async def accept_async(
        self, client: AsyncRedis, event_id: str, kind: str, payload: str, trace: str = ""
    ) -> Acceptance:
        """QueueUnavailable: nothing was accepted. The caller enqueues the wake-up (`queue_wake`) after answering:
        RQ's enqueue blocks, and the notification is durable already."""
        script = self._async_scripts.get(client)
        if script is None:
            script = self._async_scripts[client] = client.register_script(ACCEPT)
        try:
            label = await self.store.kinds.label_async(client, kind)
            keys, args = self._accept_call(event_id, payload, trace, label)
            if self.min_replicas:
                pipe = client.pipeline(transaction=False)
                await script(keys, args, client=pipe)
                pipe.wait(self.min_replicas, max(1, int(self.replica_timeout * 1000)))
                answer = self.replicated(await pipe.execute(), label)
            else:
                answer = await script(keys, args)
        except NotReplicated as exc:
            with contextlib.suppress(RedisError):
                await client.hincrby(self.store.counts.key, exc.counted, -1)
            raise
        except RedisError as exc:
            raise QueueUnavailable(_why(exc)) from exc
        return _acceptance(answer)

    def replicated(self, results: list[Any], label: str) -> Any:
        """The script's answer, after WAIT on the same connection: WAIT covers every earlier write of it, so a
        duplicate (counted: a write) waits for the first call's write too."""
        answer, acked = results
        if int(acked) < self.min_replicas:
            wanted, within = self.min_replicas, self.replica_timeout
            counted = _received_field(label) if _acceptance(answer).status == "accepted" else _DUPLICATE_FIELD
            raise NotReplicated(f"{acked} of {wanted} replica(s) acknowledged the write within {within:g} s", counted)
        return answer

    def _accept_call(self, event_id: str, payload: str, trace: str, label: str) -> tuple[list[str], list[Any]]:
        keys = [event_key(event_id), RECEIVED, self.store.counts.key, UNPLANNED, WAKE]
        # In whole milliseconds, so that the record's receivedAt and its entry's stream ID say the same time; cut
        # down, never up: a time after now would keep the notification from the planners until then.
        received_ms = millis(self.store.clock())
        received = received_ms / 1000
        args: list[Any] = [
            repr(received - self.dedup_ttl),
            event_id,
            f"{received:.3f}",
            payload,
            # The record is the dedup: it is kept for the whole window, even with a shorter retention.
            max(self.store.retention, math.ceil(self.dedup_ttl)),
            _received_field(label),
            _DUPLICATE_FIELD,
            wake_job_id(event_id),
            WAKE_TTL,
            received_ms,
            *(("trace", trace) if trace else ()),
        ]
        return keys, args

    def queue_wake(self, ident: str, event_id: str = "") -> bool:
        """Whether it was queued; one lost here is made again by the heartbeat's sweep (the work waits in Redis)."""
        try:
            self.queue.enqueue_call(
                WORK_JOB,
                args=(event_id,),
                job_id=ident,
                result_ttl=RESULT_TTL,
                failure_ttl=self.store.retention,
                timeout=JOB_TIMEOUT,
            )
        except RedisError as exc:
            log.warning("wake-up job not queued (%s): the workers' sweep queues one", type(exc).__name__)
            return False
        return True

    def request_wake(self) -> bool:
        """Queue a wake-up unless one is queued and not started (the flag); whether one was."""
        ident = job_id("wake", uuid.uuid4().hex)  # a job of its own, never one RQ may still hold
        if not self.redis.set(WAKE, ident, nx=True, ex=WAKE_TTL):
            return False
        return self.queue_wake(ident)

    def recover_wake(self) -> bool:
        """`request_wake`, first dropping a flag that names no queued job (lost in a failover, or run without
        clearing it): it would hold back every wake-up until WAKE_TTL."""
        flag = self.redis.get(WAKE)
        if isinstance(flag, bytes) and not self._waiting(flag.decode()):
            self.redis.delete(WAKE)  # were it set anew meanwhile, one wake-up more: harmless
        return self.request_wake()

    def _waiting(self, ident: str) -> bool:
        try:
            return Job.fetch(ident, connection=self.redis).get_status() == JobStatus.QUEUED
        except NoSuchJobError:
            return False

    def wake_at(self, at: float) -> None:
        """An RQ scheduled job, one per second however many come due in it; a lost one, the sweep makes good."""
        if at <= self.store.clock():
            self.request_wake()
            return
        second = math.ceil(at)
        # RQ keeps a scheduled time in whole seconds, rounded down: the next whole second after the time due,
        # so that a job never runs before the time asked for (a service's Retry-After, say).
        self.queue.enqueue_at(
            datetime.fromtimestamp(second, UTC),
            WORK_JOB,
            job_id=job_id("wake-at", str(second)),
            result_ttl=RESULT_TTL,
            failure_ttl=self.store.retention,
            job_timeout=JOB_TIMEOUT,
        )

    def enqueue_deliveries(self, ids: list[str]) -> None:
        if ids:
            self.schedule(dict.fromkeys(ids, self.now_everywhere()))

    def now_everywhere(self) -> float:
        """The earlier of this clock and Redis's: a release from a CLI whose clock runs ahead is due at once."""
        seconds, micros = self.redis.time()
        return min(self.store.clock(), seconds + micros / 1e6)

    def schedule(self, due: Mapping[str, float], slots: Mapping[str, float] | None = None) -> None:
        if not due:
            return
        self.store.leases.schedule(due, slots)
        moment = self.store.clock()
        if any(t <= moment for t in due.values()):
            self.request_wake()
        for second in sorted({math.ceil(t) for t in due.values() if t > moment}):
            self.wake_at(second)

    def retry_later(self, delivery_id: str, delay: float, slot_at: float | None = None) -> None:
        """`slot_at`: the rate-limit slot it booked."""
        slots = {delivery_id: slot_at} if slot_at is not None else None
        self.schedule({delivery_id: self.store.clock() + delay}, slots)

    def deliver_at(self, delivery_id: str, at: float) -> None:
        self.schedule({delivery_id: at})


def _acceptance(answer: Any) -> Acceptance:
    """The accept script's answer: 0 duplicate, 1 accepted, or the id of the wake-up job to enqueue."""
    if answer == 0:
        return Acceptance("duplicate")
    if answer == 1:
        return Acceptance("accepted")
    return Acceptance("accepted", answer.decode() if isinstance(answer, bytes) else str(answer))


def _why(exc: RedisError) -> str:
    """The error's type, and the script's own words (no address or credential) when it refused."""
    return f"{type(exc).__name__}: {exc}" if isinstance(exc, ResponseError) else type(exc).__name__


_DUPLICATE_FIELD = metric_field("relay_notifications_duplicate_total")


@lru_cache(maxsize=1024)
def _received_field(kind: str) -> str:
    return metric_field("relay_notifications_received_total", kind=kind)
