"""Who may call the admin API, and with what body: the admin credentials (throttled when wrong), no write from
another site in open mode (no `admin_tokens`), a JSON object of bounded size, and 503 when Redis fails under a
handler. Every handler of `/api/v1/` is wrapped by `admin_only` (relay.runtime.app)."""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from redis.exceptions import RedisError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from relay.config import Config
from relay.core.numbers import non_finite_at
from relay.web.auth import admin_allowed
from relay.web.errors import RETRY_AFTER, Answered, error_response, is_json
from relay.web.forms import bounded_body
from relay.web.operation import ADMIN_SECURITY, operation_of
from relay.web.throttle import API, Guard

Handler = Callable[[Request], Awaitable[Response]]
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def from_another_site(request: Request) -> bool:
    """By `Sec-Fetch-Site`, or an `Origin` other than this host's; a tool (curl, a script) sends neither."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return True
    origin = request.headers.get("origin")
    return origin is not None and urlsplit(origin).netloc != request.headers.get("host")


def admin_only(handler: Handler, config: Callable[[], Config], guard: Guard) -> Handler:
    """`handler` behind the admin credentials (429 for too many wrong ones), 503 when Redis fails under it; its
    OpenAPI description says it needs them."""

    @functools.wraps(handler)
    async def guarded(request: Request) -> Response:
        server = config().server
        if server.admin_tokens and (throttled := await guard.check(request, API)) is not None:
            return throttled
        if not server.admin_tokens and request.method in WRITES and from_another_site(request):
            return error_response(
                403,
                ["the request came from another site (its Origin or Sec-Fetch-Site says so)"],
                "A write from another site is refused: with no admin_tokens, a web page could make it.",
                solutions=["Call the API from a tool, not a web page; or set server.admin_tokens."],
            )
        if not admin_allowed(server, request.headers):
            await guard.failed(request, API, "no valid admin token")
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

    described = operation_of(handler)
    return replace(described, security=ADMIN_SECURITY)(guarded) if described is not None else guarded


async def json_object(
    request: Request,
    what: str,
    limit: int | None = None,
    empty: dict[str, Any] | None = None,
    solution: str = "Send any of ids, eventId, kind, channel, since.",
) -> dict[str, Any]:
    """The request's JSON object (an empty body: `empty`, when given); else Answered: 400, 413, 415 or 422."""
    try:
        raw = await (request.body() if limit is None else bounded_body(request, limit))
    except ClientDisconnect:
        raise Answered(
            error_response(400, ["the client closed the connection"], f"The {what} request was not received.")
        ) from None
    if raw is None:
        raise Answered(error_response(413, [f"the body is over {limit} bytes"], f"The {what} request is too large."))
    content_type = request.headers.get("content-type")
    if raw.strip() and not is_json(content_type or ""):
        # A form or a typeless fetch of another site can post text/plain, form data or no type at all, never
        # JSON without a preflight: insisting on JSON keeps an open (token-less) admin API safe from them.
        raise Answered(
            error_response(
                415,
                [f"content type {content_type!r} is not JSON" if content_type else "the body has no content type"],
                f"The {what} request must be JSON.",
                solutions=["Send the body with Content-Type: application/json."],
            )
        )
    try:
        body = empty if empty is not None and not raw.strip() else json.loads(raw)
        if not isinstance(body, dict):
            raise ValueError("the body must be a JSON object")
    except ValueError as exc:
        raise Answered(
            error_response(422, [str(exc)], f"Invalid {what} request: {exc}", solutions=[solution])
        ) from None
    # json.loads takes NaN and Infinity, and reads 1e400 as infinity: none of them is a number to store.
    path = non_finite_at(body)
    if path is not None:
        raise Answered(
            error_response(
                422,
                [f"{path}: not a finite number (NaN, Infinity, or past the range of a double, like 1e400)"],
                f"Invalid {what} request: {path} is not a finite number.",
                field=path,
                solutions=[solution],
            )
        )
    return body
