"""Decide and record: a delivery's next state from the outcome of its send (`relay.core.outcome.next_step`),
stored in one round trip with what follows it (a digest's items), after anything that state depends on (a
retry's scheduled job, a fallback's deliveries) is queued."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import replace
from typing import Any

from redis.exceptions import RedisError

from relay.core.lookup import fallback_channels
from relay.core.model import Delivery, delivery_id, trace_id
from relay.core.outcome import Delivered, Outcome, Transient, attempt_entry, logged, next_step
from relay.core.states import SENDABLE, State
from relay.delivery.context import Context
from relay.storage import exemplars
from relay.storage.records import LATENCY, SEND_LATENCY
from relay.storage.store import StateChange

log = logging.getLogger("relay.delivery.jobs")


def note_try(record: Delivery, outcome: Outcome, took: float | None, now: float) -> None:
    """One more try in the record's attempt log, whatever it leads to (a probe of a down channel marked so)."""
    entry = attempt_entry(outcome, record.attemptTimes[-1] if record.attemptTimes else now, took)
    if record.probing:
        entry["probe"] = True
    record.attemptLog = logged(record.attemptLog, entry)


def decide(
    rt: Context,
    record: Delivery,
    previous: State,
    outcome: Outcome,
    ctx: dict[str, str],
    took: float | None = None,
    followers: list[Delivery] | None = None,
) -> str:
    """Store the state that `outcome` leads to; `followers` (a digest's items) take the same state."""
    with rt.tracer.span("relay.record"):
        step = next_step(outcome, record.attempts, record.maxAttempts, rt.config.retry.backoff)
        record.state, record.lastError = step.state, step.reason
        note_try(record, outcome, took, rt.clock())
        if isinstance(outcome, Delivered):
            # From when it could go: the time a delivery was held by quiet hours (or gathered) is not latency.
            since = max(record.createdAt, record.notBefore or 0.0)
            rt.store.update_many(
                [StateChange(record, previous, latency_from=since, send_seconds=took), *follow(record, followers)]
            )
            if record.trace and rt.tracer.on:
                _exemplars(rt, record, record.updatedAt - since, took)
            log.info(
                "delivered", extra={**ctx, "state": record.state, "template": record.templateUsed or record.template}
            )
            return record.state
        kind = "transient" if isinstance(outcome, Transient) else "permanent"
        change = StateChange(record, previous, send_seconds=took, labels={"reason": kind})
        if step.state is State.RETRYING and step.retry_in is not None:
            change.due = rt.clock() + step.retry_in  # kept until then at least
            rt.work.retry_later(record.id, step.retry_in)  # due then before the state is stored
            rt.store.update_many([change, *follow(record, followers)])
            log.info(
                "failed, retrying in %gs: %s", step.retry_in, record.lastError, extra={**ctx, "state": record.state}
            )
            return record.state
        extra = fallback_channels(record.fallback, record.fallbackFor is not None, set(rt.config.channels))
        if extra:
            queue_new(rt, record.eventId, [_fallback(rt, record, name) for name in extra])
        rt.store.update_many([change, *follow(record, followers)])
        log.warning("delivery failed: %s", record.lastError, extra={**ctx, "state": record.state})
        return record.state


def _exemplars(rt: Context, record: Delivery, latency: float, took: float | None) -> None:
    """This delivery's trace as the exemplar of the latency buckets it was just counted in (tracing on only)."""
    observations: list[tuple[str, float, dict[str, str]]] = [(LATENCY, max(0.0, latency), {})]
    if took is not None:
        observations.append((SEND_LATENCY, took, {"channel": record.channel}))
    with contextlib.suppress(RedisError):  # a lost exemplar is no lost delivery
        exemplars.note(rt.redis, trace_id(record.trace) or "", record.updatedAt, observations)


def store(
    rt: Context,
    record: Delivery,
    previous: State,
    state: State,
    why: str,
    ctx: dict[str, str],
    reason: str = "",
    followers: list[Delivery] | None = None,
) -> str:
    """Store a state reached without a send (skipped, expanded, failed for the config)."""
    record.state, record.lastError = state, why
    labels = {"reason": reason} if reason else {}
    with rt.tracer.span("relay.record", **{"relay.state": str(state)}):
        rt.store.update_many([StateChange(record, previous, labels=labels), *follow(record, followers)])
    if state is State.FAILED:
        log.warning("delivery failed: %s", why, extra=ctx)
    else:
        log.info("delivery %s: %s", state, why, extra=ctx)
    return record.state


def log_context(record: Delivery) -> dict[str, str]:
    """What a delivery's log lines say it is (the `extra` of each)."""
    return {"eventId": record.eventId, "deliveryId": record.id, "channel": record.channel}


def follow(digest: Delivery, items: list[Delivery] | None) -> list[StateChange]:
    """A digest's items take its state and its tries (and say why, when it is not delivered)."""
    changes = []
    for item in items or []:
        previous = item.state
        item.state = digest.state
        item.attempts, item.attemptTimes = digest.attempts, list(digest.attemptTimes)
        item.attemptLog = list(digest.attemptLog)
        item.lastError = f"digest {digest.id}: {digest.lastError}" if digest.lastError else None
        changes.append(StateChange(item, previous))
    return changes


def _fallback(rt: Context, record: Delivery, name: str) -> Delivery:
    per_recipient = rt.config.channels[name].per_recipient
    return derived(
        record,
        name,
        rt.clock(),
        channel=name,
        fallback=[],
        fallbackFor=record.id,
        address=record.address if per_recipient else None,
    )


def derived(record: Delivery, key: str, ts: float, **changes: Any) -> Delivery:
    """A new delivery born of `record` (a group member, a fallback) at `ts`, with a stable id of its own."""
    ident = delivery_id(record.eventId, record.messageIndex, f"{record.channel}>{key}", record.recipientIndex)
    return fresh(record, ts, id=ident, **changes)


def fresh(record: Delivery, ts: float, **changes: Any) -> Delivery:
    """A copy of `record` born at `ts`: none of its tries, queued and held by nothing (its `trace` kept)."""
    reset = replace(
        record,
        state=State.QUEUED,
        attempts=0,
        lastError=None,
        createdAt=ts,
        updatedAt=ts,
        attemptTimes=[],
        attemptLog=[],
        sentTitle=None,
        sentText=None,
        members=[],
        notBefore=None,
        templateUsed=None,
        firstTry=None,
        thread={"key": record.thread["key"]} if record.thread else None,  # its own place in its conversation
    )
    return replace(reset, **changes)


def queue_new(rt: Context, event_id: str, records: list[Delivery]) -> None:
    """Deliveries born of one being sent (a fallback, a group's members): stored queued and due now."""
    wake_for(rt, rt.store.create_deliveries(event_id, records))


def wake_for(rt: Context, stored: list[Delivery]) -> None:
    """One at each held delivery's notBefore, and one now for those no lease of this worker's holds."""
    for at in sorted({r.notBefore for r in stored if r.state is State.HELD and r.notBefore is not None}):
        rt.work.wake_at(at)
    if any(r.state in SENDABLE and not r.held_lease for r in stored):
        rt.work.request_wake()


def created(records: list[Delivery], stored: list[Delivery]) -> list[Delivery]:
    """The records `Store.create_deliveries` created (returned as given), not those it found stored."""
    given = {id(r) for r in records}
    return [r for r in stored if id(r) in given]
