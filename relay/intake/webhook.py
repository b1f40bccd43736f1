"""The webhook: checks (headers, size, content type, credentials and signature, JSON, the schema), then durable
intake. Each step raises `Refused` with the finished error answer, so the handler reads as the list of steps."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, Literal

from pydantic import ValidationError
from pydantic_core import from_json
from redis.asyncio import Redis as AsyncRedis
from redis.exceptions import RedisError
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from typing_extensions import TypedDict  # pydantic reads only these TypedDicts on Python 3.11

from relay.config import Config, LimitsConfig, ServerConfig
from relay.core.fanout import deliveries_per_message
from relay.core.model import LIMIT_ERROR, Notification, json_depth, too_deep_at
from relay.core.numbers import constant_at, may_hold_non_finite, non_finite_at
from relay.intake.refusals import (
    Refused,
    bad_json,
    headers_too_large,
    not_a_number,
    not_json_type,
    not_object,
    not_replicated,
    refused,
    too_deep,
    too_large,
    unauthorized,
    unavailable,
)
from relay.storage.store import Store
from relay.storage.work_queue import Acceptance, NotReplicated, QueueUnavailable, WorkQueue
from relay.tracing import OFF_TRACER, Tracer
from relay.web.auth import body_signature_problem, signature_offered, webhook_allowed
from relay.web.errors import error_response, is_json, validation_response
from relay.web.forms import bounded_body
from relay.web.operation import WEBHOOK_SECURITY, Answer, Operation
from relay.web.throttle import WEBHOOK, Guard

log = logging.getLogger("relay.intake.webhook")


def parse_json(raw: bytes, max_depth: int) -> Any:
    """Nesting measured on the text first (no deep recursion); parsed as the workers parse (pydantic), so nothing is
    accepted that a worker would fail to read."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise bad_json("body is not UTF-8") from None
    # Nesting deeper than the limit needs more opening brackets than that: counting them is C-fast,
    # and only a body with that many pays for the full scan.
    openings = text.count("{") + text.count("[")
    if openings > max_depth and json_depth(text) > max_depth:
        raise too_deep(max_depth, too_deep_at(text, max_depth) or "")
    try:
        # NaN and Infinity are not JSON, whatever some encoders write (the answer names where they are).
        data = from_json(raw, allow_inf_nan=False)
    except ValueError as exc:
        literal = constant_at(text)
        refusal = bad_json(f"body is not valid JSON: {exc}") if literal is None else not_a_number(literal, 400)
        raise refusal from None
    # 1e400 is JSON, but reads as infinity, which no worker could store or send on.
    if may_hold_non_finite(raw) and (path := non_finite_at(data)) is not None:
        raise not_a_number(path, 422)
    return data


def validate_notification(raw: bytes, limits: LimitsConfig) -> Notification:
    """Parse, bound and validate a webhook body: CPU work on up to max_body_bytes, so run off the event loop."""
    data = parse_json(raw, limits.max_depth)
    if not isinstance(data, dict):
        raise not_object(data)
    try:
        return Notification.model_validate(data, context={"limits": limits})
    except ValidationError as exc:
        over = any(e["type"] == LIMIT_ERROR for e in exc.errors())
        raise Refused(validation_response(exc), "limits" if over else "schema") from None


def bounded_fan_out(config: Config, notification: Notification) -> None:
    """Counted from the routes, so that what is answered 202 is what relay plans whole."""
    limit = config.server.limits.max_deliveries
    total = sum(deliveries_per_message(config, notification))
    if total <= limit:
        return
    raise refused(
        422,
        f"messages: {total} deliveries is over the limit of {limit} for one notification",
        f"The notification would make {total} deliveries; relay takes at most {limit} for one notification.",
        f"Split it into notifications of at most {limit} deliveries (each message counts once per channel its "
        "routes take, and once per recipient for a per-recipient channel), or raise "
        "server.limits.max_deliveries.",
        "limits",
        field="messages",
    )


async def authenticated_body(request: Request, server: ServerConfig, guard: Guard) -> bytes:
    """Header credentials, else a valid signature; a client over the limit gets 429 before they are looked at."""
    headers = request.headers
    # uvicorn's h11 only bounds a header block that arrives in pieces; one read can carry 256 KiB. Its size as
    # sent: each `name: value` line and its CRLF.
    if sum(len(name) + len(value) + 4 for name, value in headers.raw) > server.limits.max_header_bytes:
        raise headers_too_large(server.limits.max_header_bytes)
    if server.auth.enabled and (throttled := await guard.check(request, WEBHOOK)) is not None:
        raise Refused(throttled, "throttled")
    by_header = webhook_allowed(server, headers)
    if not by_header and not signature_offered(server, headers):
        await guard.failed(request, WEBHOOK, "no valid token or Basic credentials")
        raise unauthorized()
    try:
        raw = await bounded_body(request, server.max_body_bytes)
    except ClientDisconnect:
        gone = error_response(400, ["the client closed the connection"], "The body was not received.")
        raise Refused(gone, None) from None
    if raw is None:
        raise too_large(server.max_body_bytes)
    if not by_header:
        problem = body_signature_problem(server.auth, headers, raw, guard.clock())  # the app's one clock
        if problem is not None:
            await guard.failed(request, WEBHOOK, problem)
            raise unauthorized()
    return raw


class Accepted(TypedDict):
    eventId: str
    status: Literal["accepted", "duplicate"]


class Webhook:
    """POST server.path. The webhook path and the intake are fixed for the life of the process; the
    config (server settings, routes) is read at each call, so that a reload takes effect."""

    def __init__(
        self,
        work: WorkQueue,
        counters: Store,
        config: Callable[[], Config],
        connect: Callable[[], AsyncRedis],
        guard: Guard,
        tracer: Tracer = OFF_TRACER,
    ) -> None:
        self.work, self.counters, self.config, self.connect = work, counters, config, connect
        self.guard = guard
        self.tracer = tracer  # the process's: the intake's traceparent is its current span's
        # Durable intake on an asyncio connection of the running loop (one client per loop).
        self.clients: dict[asyncio.AbstractEventLoop, AsyncRedis] = {}

    async def accept(self, event_id: str, kind: str, payload: str) -> Acceptance:
        loop = asyncio.get_running_loop()
        client = self.clients.get(loop)
        if client is None:
            client = self.clients[loop] = self.connect()
        # The request's trace (the platform's, from its traceparent, or one started here) goes with the event.
        return await self.work.accept_async(client, event_id, kind, payload, self.tracer.carrier())

    def rejected(self, status: int, reason: str) -> None:
        with contextlib.suppress(RedisError):
            self.counters.incr("relay_notifications_rejected_total", status=str(status), reason=reason)

    @Operation(
        "Receive one notification",
        {202: Answer("Accepted (durable) or duplicate", Accepted)},
        errors=(400, 401, 413, 415, 422, 429, 431, 503),
        request=Notification,
        security=WEBHOOK_SECURITY,
    )
    async def receive(self, request: Request) -> Response:
        try:
            config = self.config()
            server = config.server
            raw = await authenticated_body(request, server, self.guard)
            if not is_json(request.headers.get("content-type", "")):
                raise not_json_type(request.headers.get("content-type"))
            # Parsing and validating is CPU work: a thread would add its hop and still hold the GIL.
            notification = validate_notification(raw, server.limits)
            bounded_fan_out(config, notification)
        except Refused as refusal:
            if refusal.reason is not None:
                await run_in_threadpool(self.rejected, refusal.response.status_code, refusal.reason)
            return refusal.response
        try:
            # The payload is stored as received (unknown fields kept); it decoded as UTF-8 above.
            acceptance = await self.accept(notification.event_id, notification.kind, raw.decode())
        except NotReplicated as exc:
            log.warning(
                "not acknowledged by the replicas, answered 503: %s", exc, extra={"eventId": notification.event_id}
            )
            return not_replicated()
        except QueueUnavailable as exc:
            log.error("queue unavailable, answered 503: %s", exc, extra={"eventId": notification.event_id})
            return unavailable()
        status = acceptance.status
        log.info("notification %s", status, extra={"eventId": notification.event_id, "kind": notification.kind})
        # Durable already: the wake-up job (RQ's blocking enqueue, in a thread) follows the answer.
        wake = None
        if acceptance.wake_job is not None:
            wake = BackgroundTask(self.work.queue_wake, acceptance.wake_job, notification.event_id)
        return JSONResponse({"eventId": notification.event_id, "status": status}, 202, background=wake)
