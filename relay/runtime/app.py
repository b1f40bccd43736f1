"""The Starlette app: routes and error answers, assembled from the handlers of each package, which take what they
need from the Runtime; config is read through `settings` at each request, so that a reload takes effect."""

from __future__ import annotations

import functools
import logging

from redis.asyncio import Redis as AsyncRedis
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from relay.admin.access import Handler, admin_only
from relay.admin.api import AdminApi
from relay.admin.channels import ChannelsApi
from relay.admin.counters import CounterReader
from relay.admin.detail import DeliveryApi
from relay.admin.health import Health
from relay.admin.openapi import OpenApi
from relay.admin.people import PeopleApi
from relay.admin.silences import SilencesApi
from relay.admin.ui import AdminPage
from relay.admin.ui_view import PageData
from relay.config import Config
from relay.core.redaction import hide_path_keys
from relay.delivery.names import person_name
from relay.intake.webhook import Webhook
from relay.people.pages import PeoplePages
from relay.runtime.bootstrap import Runtime, open_async_redis, redis_url, reload_and_replan, socket_timeout
from relay.web.errors import Answered, ScrubbedErrors, error_response
from relay.web.throttle import Guard

log = logging.getLogger("relay.runtime.app")


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    messages = {404: "No such endpoint.", 405: "Method not allowed on this endpoint."}
    return error_response(
        exc.status_code,
        [str(exc.detail)],
        messages.get(exc.status_code, str(exc.detail)),
        headers=getattr(exc, "headers", None),
    )


async def answered(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Answered)
    return exc.response


async def server_error(request: Request, exc: Exception) -> Response:
    # A signed link's token is its person's key: never written down.
    log.exception("unhandled error on %s", hide_path_keys(request.url.path))
    return error_response(
        500,
        ["internal error"],
        "relay failed to handle the request.",
        solutions=["Try again later; the logs of relay say more."],
    )


def create_app(rt: Runtime) -> Starlette:
    def settings() -> Config:
        return rt.config

    url = redis_url(rt.config)

    def connect() -> AsyncRedis:
        return open_async_redis(url, socket_timeout=socket_timeout(rt.config), socket_connect_timeout=5)

    if rt.store.counts.source is None:  # this process serves /metrics: what it counts is shown there alone
        rt.store.counts.serve_as(rt.redis, rt.name)
    counters = CounterReader(rt.redis, rt.store)
    # Refused credentials of every surface, counted in Redis (relay/web/throttle.py).
    guard = Guard(connect, lambda: rt.config.server, rt.clock, rt.store.counts)
    webhook = Webhook(rt.work, rt.store, settings, connect, guard, rt.tracer)
    health = Health(rt.redis, rt.store, counters)
    api = AdminApi(rt.store, rt.work, rt.redis, settings, functools.partial(reload_and_replan, rt))
    page = AdminPage(PageData(rt.redis, rt.store, counters), rt.work, settings, rt.clock, guard)
    silences = SilencesApi(rt.store, rt.redis, rt.work, rt.clock)
    people = PeopleApi(rt.redis, settings, rt.clock)
    pages = PeoplePages(rt.redis, settings, rt.clock, guard, lambda p: person_name(rt.redis, rt.catalog, p))
    channels = ChannelsApi(rt.redis, settings, rt.clock)
    person = "/api/v1/people/{person:path}"

    def admin(handler: Handler) -> Handler:
        return admin_only(handler, settings, guard)

    routes = [
        Route(rt.config.server.path, webhook.receive, methods=["POST"]),
        Route("/healthz", health.healthz, methods=["GET"]),
        Route("/readyz", health.readyz, methods=["GET"]),
        Route("/metrics", health.metrics, methods=["GET"]),
        Route("/openapi.json", OpenApi().serve, methods=["GET"]),
        Route("/api/v1/events/{eventId:path}", admin(api.event), methods=["GET"]),
        Route("/api/v1/deliveries", admin(api.deliveries), methods=["GET"]),
        Route("/api/v1/deliveries/replay", admin(api.replay), methods=["POST"]),
        Route("/api/v1/deliveries/release", admin(api.release), methods=["POST"]),
        Route("/api/v1/deliveries/{deliveryId}", admin(DeliveryApi(rt.store).get), methods=["GET"]),
        Route("/api/v1/reload", admin(api.reload), methods=["POST"]),
        Route("/api/v1/silences", admin(silences.create), methods=["POST"]),
        Route("/api/v1/silences", admin(silences.list), methods=["GET"]),
        Route("/api/v1/silences/{id}", admin(silences.expire), methods=["DELETE"]),
        Route("/api/v1/channels", admin(channels.channels), methods=["GET"]),
        Route(person + "/preferences", admin(people.get), methods=["GET"]),
        Route(person + "/preferences", admin(people.put), methods=["PUT"]),
        Route(person + "/link", admin(people.link), methods=["GET"]),
        Route("/preferences/{token}", pages.preferences, methods=["GET"]),
        Route("/preferences/{token}", pages.save, methods=["POST"]),
        Route("/unsubscribe/{token}", pages.confirm, methods=["GET"]),
        Route("/unsubscribe/{token}", pages.unsubscribe, methods=["POST"]),
        Route("/ui", page.page, methods=["GET"]),
        Route("/ui/login", page.login_form, methods=["GET"]),
        Route("/ui/login", page.login, methods=["POST"]),
        Route("/ui/logout", page.logout, methods=["POST"]),
        Route("/ui/replay", page.replay, methods=["POST"]),
        Route("/ui/release", page.confirm_release, methods=["GET"]),
        Route("/ui/release", page.release, methods=["POST"]),
        Route("/ui/silences", page.add_silence, methods=["POST"]),
        Route("/ui/silences/expire", page.expire_silence, methods=["POST"]),
        Route("/ui/deliveries/{deliveryId}", page.delivery, methods=["GET"]),
    ]
    return Starlette(
        routes=routes,
        exception_handlers={HTTPException: http_error, Answered: answered, Exception: server_error},
        # Error answers scrubbed of every configured secret, in all its forms; then the tracer's middleware
        # (none unless tracing is on: relay.tracing).
        middleware=[Middleware(ScrubbedErrors, redactor=rt.redactor), *rt.tracer.middleware()],
    )
