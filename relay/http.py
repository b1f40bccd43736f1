"""The Starlette app: webhook intake, health, metrics, and the admin API."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from fnmatch import fnmatchcase
from typing import Any

from pydantic import ValidationError
from pydantic_core import from_json
from redis.asyncio import Redis as AsyncRedis
from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from relay.auth import admin_allowed, signature_offered, signature_problem, webhook_allowed
from relay.bootstrap import CONFIG_GENERATION, Runtime, redis_url, reload_runtime
from relay.config import ConfigError, LimitsConfig, ServerConfig
from relay.errors import error_response, validation_response
from relay.metrics import exposition
from relay.model import LIMIT_ERROR, Notification, State, json_depth, too_deep_at
from relay.openapi import openapi_document
from relay.queue import QUEUE_NAME, QueueUnavailable
from relay.redaction import remember_config
from relay.store import FAILED, DeliveryRecord, iso, parse_since
from relay.ui import ui_routes

log = logging.getLogger("relay.http")
RETRY_AFTER = "5"
WORKER_SEEN_WITHIN = 30.0
STATES = {s.value for s in State}
Handler = Callable[[Request], Awaitable[Response]]


class BodyTooLarge(Exception):
    pass


class Refused(Exception):
    """A finished error answer from one step of the webhook intake; `reason` labels the rejection metric."""

    def __init__(self, response: Response, reason: str | None) -> None:
        super().__init__(reason)
        self.response, self.reason = response, reason


async def read_limited(request: Request, limit: int) -> bytes:
    """The body, refusing more than `limit` bytes (a body of exactly the limit is fine)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _unauthorized() -> Refused:
    # One answer for every failure: which part was wrong (token, password, signature, clock) is only logged.
    return Refused(
        error_response(
            401,
            ["missing or invalid credentials"],
            "The webhook call was not authenticated.",
            solutions=["Send the credentials configured for this webhook (a token, Basic credentials or a signature)."],
            headers={"WWW-Authenticate": 'Bearer realm="relay"'},
        ),
        "auth",
    )


def _too_large(limit: int) -> Refused:
    return Refused(
        error_response(
            413,
            [f"body larger than {limit} bytes"],
            "The notification is too large.",
            solutions=[f"Send at most {limit} bytes, or raise server.max_body_bytes."],
        ),
        "size",
    )


def header_bytes(request: Request) -> int:
    """The size of the request's header block as sent: each `name: value` line and its CRLF."""
    return sum(len(name) + len(value) + 4 for name, value in request.headers.raw)


def _headers_too_large(limit: int) -> Refused:
    return Refused(
        error_response(
            431,
            [f"request headers larger than {limit} bytes"],
            "The request's headers are too large.",
            solutions=[f"Send at most {limit} bytes of headers, or raise server.limits.max_header_bytes."],
        ),
        "headers",
    )


def _not_json_type(content_type: str | None) -> Refused:
    return Refused(
        error_response(
            415,
            [f"content type {content_type or '(none)'!r} is not JSON"],
            "The notification must be sent as JSON.",
            solutions=["Send the body with Content-Type: application/json."],
        ),
        "content_type",
    )


def _bad_json(reason: str) -> Refused:
    return Refused(
        error_response(
            400, [reason], "The notification is not valid JSON.", solutions=["Send one JSON object as the body."]
        ),
        "json",
    )


def _too_deep(limit: int, path: str) -> Refused:
    return Refused(
        error_response(
            422,
            [f"{path or 'the body'}: JSON nested deeper than {limit} levels"],
            f"The notification is nested deeper than {limit} levels.",
            field=path,
            solutions=[f"Flatten the payload, or raise server.limits.max_depth (now {limit})."],
        ),
        "limits",
    )


def _not_object(data: Any) -> Refused:
    return Refused(
        error_response(
            422,
            [f"the body must be a JSON object, not {type(data).__name__}"],
            "The notification must be a JSON object.",
            field="",
            solutions=["Send one notification object as the body."],
        ),
        "schema",
    )


def _unavailable() -> Response:
    return error_response(
        503,
        ["the queue is unavailable; nothing was accepted"],
        "relay cannot store notifications right now.",
        problems=["Redis did not answer or did not confirm the write."],
        solutions=["Send the notification again after Retry-After seconds."],
        headers={"Retry-After": RETRY_AFTER},
    )


def parse_json(raw: bytes, max_depth: int) -> Any:
    """The body as JSON; the nesting is measured on the text first, so no parser recursion is ever deep.

    Parsed by the parser the workers read stored notifications with (pydantic's), so that nothing is
    accepted that a worker would then fail to read: lone surrogates, numbers out of range.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad_json("body is not UTF-8") from None
    if json_depth(text) > max_depth:
        raise _too_deep(max_depth, too_deep_at(text, max_depth) or "")
    try:
        # NaN and Infinity are not JSON, whatever some encoders write.
        return from_json(raw, allow_inf_nan=False)
    except ValueError as exc:
        raise _bad_json(f"body is not valid JSON: {exc}") from None


def validate_notification(raw: bytes, limits: LimitsConfig) -> Notification:
    """Parse, bound and validate a webhook body: CPU work on up to max_body_bytes, so run off the event loop."""
    data = parse_json(raw, limits.max_depth)
    if not isinstance(data, dict):
        raise _not_object(data)
    try:
        return Notification.model_validate(data, context={"limits": limits})
    except ValidationError as exc:
        over = any(e["type"] == LIMIT_ERROR for e in exc.errors())
        raise Refused(validation_response(exc), "limits" if over else "schema") from None


async def authenticated_body(request: Request, server: ServerConfig) -> bytes:
    """The body of a call from a known sender: header credentials, else a valid signature of the body."""
    headers = request.headers
    # uvicorn's h11 only bounds a header block that arrives in pieces; one read can carry 256 KiB.
    if header_bytes(request) > server.limits.max_header_bytes:
        raise _headers_too_large(server.limits.max_header_bytes)
    by_header = webhook_allowed(server, headers)
    if not by_header and not signature_offered(server, headers):
        log.info("webhook call refused: no valid token or Basic credentials")
        raise _unauthorized()
    try:
        raw = await read_limited(request, server.max_body_bytes)
    except BodyTooLarge:
        raise _too_large(server.max_body_bytes) from None
    except ClientDisconnect:
        gone = error_response(400, ["the client closed the connection"], "The body was not received.")
        raise Refused(gone, None) from None
    signed = server.auth.hmac
    if not by_header and signed is not None:
        problem = signature_problem(signed, headers, raw, time.time())
        if problem is not None:
            log.info("webhook call refused: %s", problem)
            raise _unauthorized()
    return raw


def create_app(rt: Runtime, extra_routes: list[BaseRoute] | None = None) -> Starlette:
    # Handlers read rt.config at each request, so that a reload takes effect; the webhook path is
    # fixed for the life of the process.
    webhook_path = rt.config.server.path
    # Error answers are scrubbed of every configured secret, in all its forms.
    remember_config(rt.config)

    url = redis_url(rt.config)
    clients: dict[asyncio.AbstractEventLoop, AsyncRedis] = {}

    async def accept(event_id: str, kind: str, payload: str) -> str:
        """Durable intake on an asyncio connection of this loop (Sentinel: the threaded client)."""
        if url.startswith("redis+sentinel://"):
            return await run_in_threadpool(rt.intake.accept, event_id, kind, payload)
        if not rt.intake.prepared:
            await run_in_threadpool(rt.intake.prepare)
        loop = asyncio.get_running_loop()
        client = clients.get(loop)
        if client is None:
            client = clients[loop] = AsyncRedis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
        return await rt.intake.accept_async(client, event_id, kind, payload)

    def rejected(status: int, reason: str) -> None:
        with contextlib.suppress(RedisError):
            rt.store.incr("relay_notifications_rejected_total", status=str(status), reason=reason)

    async def webhook(request: Request) -> Response:
        try:
            server = rt.config.server
            raw = await authenticated_body(request, server)
            if not _is_json(request.headers.get("content-type", "")):
                raise _not_json_type(request.headers.get("content-type"))
            # Parsing and validating is CPU work: a thread would add its hop and still hold the GIL.
            notification = validate_notification(raw, server.limits)
        except Refused as refusal:
            if refusal.reason is not None:
                await run_in_threadpool(rejected, refusal.response.status_code, refusal.reason)
            return refusal.response
        try:
            # The payload is stored as received (unknown fields kept); it decoded as UTF-8 above.
            status = await accept(notification.event_id, notification.kind, raw.decode())
        except QueueUnavailable as exc:
            log.error("queue unavailable, answered 503: %s", exc, extra={"eventId": notification.event_id})
            return _unavailable()
        log.info("notification %s", status, extra={"eventId": notification.event_id, "kind": notification.kind})
        return JSONResponse({"eventId": notification.event_id, "status": status}, 202)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    def _ready() -> tuple[bool, dict[str, Any]]:
        try:
            rt.redis.ping()
            workers = rt.store.workers_seen(WORKER_SEEN_WITHIN)
        except RedisError as exc:
            return False, {"redis": f"unreachable ({type(exc).__name__})", "workers": 0}
        return bool(workers), {"redis": "ok", "workers": len(workers)}

    async def readyz(request: Request) -> Response:
        ok, detail = await run_in_threadpool(_ready)
        if ok:
            return JSONResponse({"status": "ready", **detail})
        problem = "Redis is unreachable" if detail["redis"] != "ok" else "no worker seen in the last 30 s"
        return error_response(
            503,
            [problem],
            "relay is not ready.",
            problems=[problem],
            solutions=["Check Redis and start `relay worker`."],
            headers={"Retry-After": RETRY_AFTER},
        )

    def _metrics() -> str:
        try:
            counters = rt.store.counters()
            pipe = rt.redis.pipeline(transaction=False)
            pipe.llen(f"rq:queue:{QUEUE_NAME}")
            pipe.zcard(FAILED)
            depth, failed = pipe.execute()
            workers = len(rt.store.workers_seen(WORKER_SEEN_WITHIN))
            gauges = {
                "relay_queue_depth": depth,
                "relay_deliveries_failed_kept": failed,
                "relay_workers_alive": workers,
                "relay_up": 1,
            }
        except RedisError:
            counters, gauges = {}, {"relay_up": 0}
        return exposition(counters, gauges)

    async def metrics(request: Request) -> Response:
        text = await run_in_threadpool(_metrics)
        return PlainTextResponse(text, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    def admin(handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            if not admin_allowed(rt.config.server, request.headers):
                return error_response(
                    401,
                    ["missing or invalid admin credentials"],
                    "The admin API needs an admin token.",
                    solutions=["Send Authorization: Bearer <one of server.admin_tokens>."],
                    headers={"WWW-Authenticate": 'Bearer realm="relay-admin"'},
                )
            try:
                return await handler(request)
            except RedisError as exc:
                return error_response(
                    503,
                    [f"Redis is unavailable ({type(exc).__name__})"],
                    "relay cannot read its records right now.",
                    solutions=["Try again shortly."],
                    headers={"Retry-After": RETRY_AFTER},
                )

        return guarded

    def _event(event_id: str) -> dict[str, Any] | None:
        event = rt.store.event(event_id)
        if event is None:
            return None
        records = [r for r in rt.store.deliveries(rt.store.event_delivery_ids(event_id)) if r is not None]
        return {
            "eventId": event.eventId,
            "kind": event.kind,
            "receivedAt": iso(event.receivedAt),
            "deliveries": [r.public() for r in records],
        }

    async def get_event(request: Request) -> Response:
        event_id = request.path_params["event_id"]
        found = await run_in_threadpool(_event, event_id)
        if found is None:
            return error_response(
                404,
                [f"no notification with eventId {event_id!r}"],
                "That notification is unknown or has expired.",
                field="eventId",
                solutions=["Check the eventId; records are kept for the configured retention."],
            )
        return JSONResponse(found)

    async def list_deliveries(request: Request) -> Response:
        q = request.query_params
        try:
            filters = Filters.from_query(q)
            limit = int(q.get("limit", "50"))
            if limit < 1:
                raise ValueError("limit must be at least 1")
        except ValueError as exc:
            field = str(exc).split(" ", 1)[0]
            return error_response(
                422,
                [str(exc)],
                f"Invalid query: {exc}",
                field=field,
                solutions=[
                    "state is one of "
                    + ", ".join(sorted(STATES))
                    + "; since is a duration (2h) or ISO time; limit is 1 to 500."
                ],
            )
        limit = min(limit, 500)
        found = await run_in_threadpool(filters.select, rt, limit)
        # SPEC: "list deliveries": the answer is the list itself, newest first.
        return JSONResponse([r.public(with_event=True) for r in found])

    async def replay(request: Request) -> Response:
        content_type = request.headers.get("content-type")
        if content_type is not None and not _is_json(content_type):
            # A form of another site can post text/plain or form data, never JSON without a preflight:
            # insisting on JSON keeps an open (token-less) admin API safe from cross-site replays.
            return error_response(
                415,
                [f"content type {content_type!r} is not JSON"],
                "The replay request must be JSON.",
                solutions=["Send the body with Content-Type: application/json."],
            )
        raw = await request.body()
        try:
            body = json.loads(raw) if raw.strip() else {}
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            filters = Filters.from_body(body)
        except ValueError as exc:
            return error_response(
                422 if raw.strip() else 400,
                [str(exc)],
                f"Invalid replay request: {exc}",
                solutions=["Send any of ids, eventId, kind, channel, since."],
            )
        dry_run = bool(body.get("dryRun", False))
        replayed, not_replayed = await run_in_threadpool(filters.replay, rt, dry_run)
        return JSONResponse({"replayed": replayed, "dryRun": dry_run, "notReplayed": not_replayed})

    async def reload_config(request: Request) -> Response:
        try:
            notes = await run_in_threadpool(reload_runtime, rt)
        except ConfigError as exc:
            log.error("config reload refused, the running config is kept: %s", exc)
            return error_response(
                422,
                [str(exc)],
                "The new config is invalid; the running config is kept.",
                solutions=["Fix the file (`relay check` says what is wrong) and reload again."],
            )
        # Workers (any machine) watch this counter and read their own config file again.
        generation = await run_in_threadpool(rt.redis.incr, CONFIG_GENERATION)
        log.info("config reloaded (generation %s)", generation)
        return JSONResponse({"reloaded": True, "generation": generation, "notes": notes})

    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document(webhook_path))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        messages = {404: "No such endpoint.", 405: "Method not allowed on this endpoint."}
        return error_response(
            exc.status_code,
            [str(exc.detail)],
            messages.get(exc.status_code, str(exc.detail)),
            headers=getattr(exc, "headers", None),
        )

    async def server_error(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s", request.url.path)
        return error_response(
            500,
            ["internal error"],
            "relay failed to handle the request.",
            solutions=["Try again later; the logs of relay say more."],
        )

    routes = [
        Route(webhook_path, webhook, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/api/v1/events/{event_id:path}", admin(get_event), methods=["GET"]),
        Route("/api/v1/deliveries", admin(list_deliveries), methods=["GET"]),
        Route("/api/v1/deliveries/replay", admin(replay), methods=["POST"]),
        Route("/api/v1/reload", admin(reload_config), methods=["POST"]),
        *ui_routes(rt),
        *(extra_routes or []),
    ]
    return Starlette(routes=routes, exception_handlers={HTTPException: http_error, Exception: server_error})


class Filters:
    """Which deliveries a listing or a replay is about."""

    def __init__(
        self,
        state: str | None = None,
        kind: str | None = None,
        channel: str | None = None,
        since: float | None = None,
        event_id: str | None = None,
        ids: list[str] | None = None,
    ) -> None:
        self.state, self.kind, self.channel, self.since = state, kind, channel, since
        self.event_id, self.ids = event_id, ids

    @classmethod
    def from_query(cls, q: Any) -> Filters:
        state = q.get("state") or None
        if state is not None and state not in STATES:
            raise ValueError(f"state {state!r} is not one of {', '.join(sorted(STATES))}")
        return cls(
            state,
            q.get("kind") or None,
            q.get("channel") or None,
            _since(q.get("since")),
            q.get("eventId") or q.get("event") or None,
        )

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> Filters:
        ids = body.get("ids")
        if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, str) for i in ids)):
            raise ValueError("ids must be a list of delivery ids")
        for key in ("eventId", "kind", "channel", "since"):
            if body.get(key) is not None and not isinstance(body[key], str):
                raise ValueError(f"{key} must be a string")
        return cls(
            State.FAILED.value,
            body.get("kind"),
            body.get("channel"),
            _since(body.get("since")),
            body.get("eventId"),
            ids,
        )

    def matches(self, r: DeliveryRecord) -> bool:
        if self.state and r.state != self.state:
            return False
        if self.kind and not fnmatchcase(r.kind, self.kind):
            return False
        if self.channel and r.channel != self.channel:
            return False
        if self.since is not None and r.updatedAt < self.since and r.createdAt < self.since:
            return False
        return not (self.event_id and r.eventId != self.event_id)

    def candidates(self, rt: Runtime) -> list[DeliveryRecord]:
        if self.ids is not None:
            return [r for r in rt.store.deliveries(self.ids) if r is not None]
        if self.event_id:
            return [r for r in rt.store.deliveries(rt.store.event_delivery_ids(self.event_id)) if r is not None]
        index = FAILED if self.state == State.FAILED.value else None
        return list(rt.store.iter_recent(None, index) if index else rt.store.iter_recent(self.since))

    def select(self, rt: Runtime, limit: int) -> list[DeliveryRecord]:
        found = [r for r in self.candidates(rt) if self.matches(r)]
        found.sort(key=lambda r: (r.createdAt, r.id), reverse=True)
        return found[:limit]

    def replay(self, rt: Runtime, dry_run: bool) -> tuple[int, list[dict[str, str]]]:
        candidates = self.candidates(rt)
        chosen = [r for r in candidates if self.matches(r)]
        not_replayed = []
        if self.ids is not None:
            known = {r.id for r in candidates}
            not_replayed = [{"id": r.id, "state": r.state} for r in candidates if r.state != State.FAILED.value]
            not_replayed += [{"id": i, "state": "unknown"} for i in self.ids if i not in known]
        count = rt.intake.replay(chosen, rt.config.retry.attempts, dry_run)
        return count, not_replayed


def _since(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        return parse_since(str(value))
    except ValueError:
        raise ValueError(f"since {value!r} is neither a duration (2h) nor an ISO 8601 time") from None
