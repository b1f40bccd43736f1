"""The Starlette app: webhook intake, health, metrics, and the admin API."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis as AsyncRedis
from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from relay.admin.metrics import exposition
from relay.admin.openapi import openapi_document
from relay.admin.selection import STATES, Filters
from relay.admin.ui import ui_routes
from relay.config import ConfigError
from relay.core.redaction import remember_config
from relay.intake.auth import admin_allowed
from relay.intake.errors import error_response
from relay.intake.webhook import (
    RETRY_AFTER,
    Refused,
    authenticated_body,
    is_json,
    not_json_type,
    unavailable,
    validate_notification,
)
from relay.runtime.bootstrap import CONFIG_GENERATION, Runtime, open_async_redis, redis_url, reload_runtime
from relay.storage.queue import QUEUE_NAME, QueueUnavailable
from relay.storage.store import FAILED, iso

log = logging.getLogger("relay.runtime.app")
WORKER_SEEN_WITHIN = 30.0
Handler = Callable[[Request], Awaitable[Response]]


def create_app(rt: Runtime, extra_routes: list[BaseRoute] | None = None) -> Starlette:
    # Handlers read rt.config at each request, so that a reload takes effect; the webhook path is
    # fixed for the life of the process.
    webhook_path = rt.config.server.path
    # Error answers are scrubbed of every configured secret, in all its forms.
    remember_config(rt.config)

    url = redis_url(rt.config)
    clients: dict[asyncio.AbstractEventLoop, AsyncRedis] = {}

    async def accept(event_id: str, kind: str, payload: str) -> str:
        """Durable intake on an asyncio connection of this loop."""
        if not rt.intake.prepared:
            await run_in_threadpool(rt.intake.prepare)
        loop = asyncio.get_running_loop()
        client = clients.get(loop)
        if client is None:
            client = clients[loop] = open_async_redis(url, socket_timeout=10, socket_connect_timeout=5)
        return await rt.intake.accept_async(client, event_id, kind, payload)

    def rejected(status: int, reason: str) -> None:
        with contextlib.suppress(RedisError):
            rt.store.incr("relay_notifications_rejected_total", status=str(status), reason=reason)

    async def webhook(request: Request) -> Response:
        try:
            server = rt.config.server
            raw = await authenticated_body(request, server)
            if not is_json(request.headers.get("content-type", "")):
                raise not_json_type(request.headers.get("content-type"))
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
            return unavailable()
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
        if content_type is not None and not is_json(content_type):
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
