"""RQ adapter: the intake (dedup, event and its place among the unplanned in one round trip; the planning job
through RQ's enqueue), delivery jobs, retries, replay."""

from __future__ import annotations

import hashlib
import logging
import math
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any
from weakref import WeakKeyDictionary

from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from redis.commands.core import AsyncScript, Script
from redis.exceptions import RedisError
from rq import Callback, Queue, Retry

from relay.core.model import Delivery, State
from relay.storage.planning import PENDING, PENDING_TTL, UNPLANNED, Planning
from relay.storage.scripts import ACCEPT
from relay.storage.store import (
    EVENTS,
    METRICS,
    StateChange,
    Store,
    dedup_key,
    event_key,
    metric_field,
    now,
)

QUEUE_NAME = "relay"
# A planning job plans every notification waiting, in batches (`relay.storage.planning`).
PLAN_JOB = "relay.delivery.jobs.plan_batch"
DELIVER_JOB = "relay.delivery.jobs.deliver_job"
# RQ-level retries only cover a crashed or killed worker; send failures are retried by relay itself.
# No interval: a job found abandoned goes straight back to the queue, with no wait on a scheduler.
CRASH_RETRY = Retry(max=3)
# When those retries are used up too, the delivery is marked failed (replayable), never left queued.
DELIVERY_GIVEN_UP = Callback("relay.delivery.jobs.delivery_job_failed")
# RQ declares a job abandoned once its timeout plus 60 s have passed since its start, and looks every
# maintenance interval (15 s, `relay.runtime.worker`): jobs only plan and hand over (the sending happens
# beside them, under leases), so a short timeout lets a job whose worker was killed run again in ~95 s.
JOB_TIMEOUT = 20
# A finished job's hash is kept this long (RQ's result_ttl): with 0, RQ deletes the job at once, which
# costs about a dozen more round trips per job (a look through every registry and execution) than
# letting the hash expire.
RESULT_TTL = 10
RELEASE_LOCK_TTL = 30  # seconds: a release holds a delivery's send lock only while it stores the new state
log = logging.getLogger("relay.intake")


class QueueUnavailable(Exception):
    """Redis could not be reached or did not confirm the write; nothing was accepted."""


def job_id(prefix: str, ident: str, attempt: int | None = None) -> str:
    # RQ ids allow letters, digits, '_' and '-': ours are hashes, so they always fit.
    return f"relay-{prefix}-{ident}" + (f"-{attempt}" if attempt is not None else "")


def planning_job_id(event_id: str) -> str:
    """The planning job a notification's arrival queues, when none is pending: stable for its event."""
    return job_id("plan", _hash(event_id))


@dataclass(frozen=True)
class Acceptance:
    """What the accept script answered: `accepted` or `duplicate`, and the planning job to enqueue now
    (its pending flag already set by the script), when none was pending."""

    status: str
    planning_job: str | None = None


@dataclass
class Intake:
    redis: Redis
    store: Store
    queue: Queue
    dedup_ttl: float
    job_timeout: int
    planning: Planning = field(init=False, repr=False)
    # redis-py's own script objects: EVALSHA, and the script loaded again when a restarted Redis forgot it.
    _script: Script = field(init=False, repr=False)
    _async_scripts: WeakKeyDictionary[AsyncRedis, AsyncScript] = field(
        init=False, repr=False, default_factory=WeakKeyDictionary
    )

    def __post_init__(self) -> None:
        self.planning = Planning(self.redis)
        self._script = self.redis.register_script(ACCEPT)

    @classmethod
    def create(cls, redis: Redis, store: Store, dedup_ttl: float) -> Intake:
        return cls(redis, store, Queue(QUEUE_NAME, connection=redis), dedup_ttl, JOB_TIMEOUT)

    def accept(self, event_id: str, kind: str, payload: str) -> str:
        """'accepted' once the event is in Redis among the unplanned ones (atomically, one round trip), with a
        planning job queued unless one is pending; else 'duplicate'. Raises QueueUnavailable on any Redis
        error of the accept itself: nothing was accepted then."""
        try:
            answer = self._script(*self._accept_call(event_id, kind, payload))
        except RedisError as exc:
            raise QueueUnavailable(type(exc).__name__) from exc
        acceptance = _acceptance(answer)
        if acceptance.planning_job is not None:
            self.queue_planning(acceptance.planning_job, event_id)
        return acceptance.status

    async def accept_async(self, client: AsyncRedis, event_id: str, kind: str, payload: str) -> Acceptance:
        """`accept` on an asyncio connection, with no thread hop: the same script, one round trip. The planning
        job it may ask for is the caller's to enqueue (`queue_planning`), after the answer is sent: RQ's
        enqueue is blocking, and the notification is durable without it."""
        script = self._async_scripts.get(client)
        if script is None:
            script = self._async_scripts[client] = client.register_script(ACCEPT)
        try:
            answer = await script(*self._accept_call(event_id, kind, payload))
        except RedisError as exc:
            raise QueueUnavailable(type(exc).__name__) from exc
        return _acceptance(answer)

    def _accept_call(self, event_id: str, kind: str, payload: str) -> tuple[list[str], list[Any]]:
        """The keys and arguments of the accept script for one notification."""
        keys = [dedup_key(event_id), event_key(event_id), EVENTS, METRICS, UNPLANNED, PENDING]
        args: list[Any] = [
            max(1, int(self.dedup_ttl)),
            event_id,
            kind,
            repr(now()),
            payload,
            self.store.retention,
            _received_field(kind),
            _DUPLICATE_FIELD,
            planning_job_id(event_id),
            PENDING_TTL,
        ]
        return keys, args

    def queue_planning(self, ident: str, event_id: str = "") -> bool:
        """Enqueue the planning job `ident` through RQ (its pending flag is set by the caller); whether it was.
        A job lost here (Redis gone this moment) is made again by the heartbeat's sweep: the events it was for
        wait among the unplanned ones."""
        try:
            self.queue.enqueue_call(
                PLAN_JOB,
                args=(event_id,),
                job_id=ident,
                result_ttl=RESULT_TTL,
                failure_ttl=self.store.retention,
                timeout=self.job_timeout,
                retry=CRASH_RETRY,
            )
        except RedisError as exc:
            log.warning("planning job not queued (%s): the workers' sweep queues one", type(exc).__name__)
            return False
        return True

    def request_planning(self, force: bool = False) -> bool:
        """Queue a planning job unless one is pending, or even then when `force`; whether one was queued. For
        events left unplanned: a planning job's batch cut short, the claims of a dead worker given back, events
        whose job was lost."""
        ident = job_id("plan", uuid.uuid4().hex)  # a job of its own, never one RQ may still hold
        if force:
            self.redis.set(PENDING, ident, ex=PENDING_TTL)
        elif not self.redis.set(PENDING, ident, nx=True, ex=PENDING_TTL):
            return False
        return self.queue_planning(ident)

    def enqueue_deliveries(self, ids: list[str]) -> None:
        if not ids:
            return
        jobs = [
            Queue.prepare_data(
                DELIVER_JOB,
                args=(i,),
                job_id=job_id("deliver", i, int(now() * 1000)),
                result_ttl=RESULT_TTL,
                failure_ttl=self.store.retention,
                timeout=self.job_timeout,
                retry=CRASH_RETRY,
                on_failure=DELIVERY_GIVEN_UP,
            )
            for i in ids
        ]
        self.queue.enqueue_many(jobs)

    def retry_later(self, delivery_id: str, delay: float, attempt: int, slot_at: float | None = None) -> None:
        """Run the delivery again after `delay` (no sooner); `slot_at`: the rate-limit slot it booked."""
        self._schedule(delivery_id, now() + delay, slot_at, job_id("deliver", delivery_id, attempt), RESULT_TTL)

    def deliver_at(self, delivery_id: str, at: float, again: bool = False) -> None:
        """Run a held delivery at `at` (epoch seconds; no sooner) as an RQ scheduled job: no worker waits.

        From planning, one wake-up per delivery and time (planning again after a crash schedules the same
        job); `again`, from a wake-up that found it still held, a job of its own: reusing the id of the job
        running now would lose the new one when RQ discards the finished one.
        """
        ident = job_id("held", delivery_id, math.ceil(at))
        self._schedule(delivery_id, at, None, f"{ident}-{int(now() * 1000)}" if again else ident, 0)

    def _schedule(self, delivery_id: str, at: float, slot_at: float | None, ident: str, result_ttl: int) -> None:
        # RQ keeps a scheduled time in whole seconds, rounded down: the next whole second after the time
        # due, so that a job never runs before the time asked for (a service's Retry-After, say).
        self.queue.enqueue_at(
            datetime.fromtimestamp(math.ceil(at), UTC),
            DELIVER_JOB,
            delivery_id,
            slot_at,
            job_id=ident,
            result_ttl=result_ttl,
            failure_ttl=self.store.retention,
            job_timeout=self.job_timeout,
            retry=CRASH_RETRY,
            on_failure=DELIVERY_GIVEN_UP,
        )

    def release(self, records: list[Delivery], dry_run: bool = False) -> int:
        """Send held deliveries now: each queued again under its send lock (so a wake-up sending it at this
        moment is never undone), and its job enqueued; the scheduled wake-up, when it comes, finds it sent.
        Returns how many go out now, as `carried` lists them (a digest counts once, its items with it)."""
        chosen = self.carried(records, State.HELD)
        if dry_run or not chosen:
            return len(chosen)
        released = []
        for record in chosen:
            taken, current = self.store.lock_and_read(record.id, RELEASE_LOCK_TTL)
            if not taken:
                continue  # a worker has it in hand this moment: it is going out
            if current is None or current.state is not State.HELD:
                self.store.unlock(record.id)
                continue
            current.state = State.QUEUED
            # A digest, queued, goes out as it is; a delivery still to gather is marked, so that it gathers
            # apart from what its route holds (`relay.core.digest.gather_key`) and no quiet hours hold it.
            current.released = current.released or not current.items
            self.store.update(current, State.HELD)  # lets go of the lock
            released.append(current.id)
        if released:
            self.redis.hincrby(METRICS, metric_field("relay_releases_total"), len(released))
            self.enqueue_deliveries(released)
        return len(released)

    def carried(self, records: list[Delivery], state: State) -> list[Delivery]:
        """The deliveries that are sent for `records`, those in `state`: a delivery gathered into a digest goes
        out with its digest, never on its own, so it stands for its digest here (once, however many of its
        items were chosen). What a replay (failed) or a release (held) sends, lists and counts."""
        wanted = list(dict.fromkeys(r.digest for r in records if r.digest))
        found = {d.id: d for d in self.store.deliveries(wanted) if d is not None}
        out = {r.id: r for r in records if not r.digest}
        out.update((i, found[i]) for i in wanted if i in found and i not in out)
        return [r for r in out.values() if r.state is state]

    def replay(self, records: list[Delivery], attempts: int, dry_run: bool = False) -> int:
        """Requeue failed deliveries with a fresh retry budget; delivered ones are never touched. Returns how
        many go out again, as `carried` lists them."""
        chosen = self.carried(records, State.FAILED)
        if dry_run or not chosen:
            return len(chosen)
        for record in chosen:
            previous = record.state
            record.state = State.QUEUED
            record.maxAttempts = record.attempts + attempts
            record.lastError = (record.lastError or "") and f"replayed after: {record.lastError}"
            # A digest's items go back with it (out of the failed list), to be sent in it again.
            items = [i for i in self.store.deliveries(record.items) if i is not None and i.state == previous]
            self.store.update_many([StateChange(record, previous)] + [_requeued(i, previous) for i in items])
        self.redis.hincrby(METRICS, metric_field("relay_replays_total"), len(chosen))
        self.enqueue_deliveries([r.id for r in chosen])
        return len(chosen)


def _acceptance(answer: Any) -> Acceptance:
    """The accept script's answer: 0 duplicate, 1 accepted, or the id of the planning job to enqueue."""
    if answer == 0:
        return Acceptance("duplicate")
    if answer == 1:
        return Acceptance("accepted")
    return Acceptance("accepted", answer.decode() if isinstance(answer, bytes) else str(answer))


def _requeued(item: Delivery, previous: State) -> StateChange:
    item.state = State.QUEUED
    return StateChange(item, previous)


def _hash(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:32]


_DUPLICATE_FIELD = metric_field("relay_notifications_duplicate_total")


@lru_cache(maxsize=1024)
def _received_field(kind: str) -> str:
    return metric_field("relay_notifications_received_total", kind=kind)
