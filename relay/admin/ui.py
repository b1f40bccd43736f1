"""The admin page at /ui: notifications and their deliveries, failures with replay, held deliveries with
release, counters. Channel URLs and secrets are never shown, only channels' names."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import quote

from redis.exceptions import RedisError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from relay.admin.channels import channel_rows
from relay.admin.ui_chart import HEIGHT, WIDTH, chart
from relay.admin.ui_query import PageQuery, back_query
from relay.admin.ui_render import THROTTLED, error_page, page_operation, posted, render, viewed
from relay.admin.ui_session import (
    COOKIE,
    clear_session,
    csrf_ok,
    csrf_token,
    matching_token,
    new_session,
    read_form,
    same_origin,
    session_parts,
    session_valid,
    set_session,
)
from relay.admin.ui_view import DELIVERIES_OF_ONE, PageData, anchor
from relay.config import Config
from relay.core.model import State
from relay.storage.sessions import EndedSessions
from relay.storage.work_queue import WorkQueue
from relay.web.auth import admin_allowed, admin_token_offered
from relay.web.operation import Answer, html_answer
from relay.web.throttle import API, UI, Guard

log = logging.getLogger("relay.admin.ui")
T = TypeVar("T")


class AdminPage:
    """The page's handlers; the config is read at each request (a reload changes the tokens)."""

    def __init__(
        self,
        data: PageData,
        work: WorkQueue,
        config: Callable[[], Config],
        clock: Callable[[], float],
        guard: Guard,
    ) -> None:
        self.data, self.work, self.config, self.clock, self.guard = data, work, config, clock, guard
        self.sessions = EndedSessions(data.redis)

    def tokens(self) -> list[str]:
        return self.config().server.admin_tokens

    async def header_auth(self, request: Request) -> bool | Response:
        """The admin API's header credentials (scripts): a wrong one counts on the API's surface, and its 429."""
        if not self.tokens() or not admin_token_offered(request.headers):
            return False
        if (throttled := await self.guard.check(request, API, page=self.throttled_page)) is not None:
            return throttled
        if admin_allowed(self.config().server, request.headers):
            return True
        await self.guard.failed(request, API, "no valid admin token (admin page)")
        return False

    def throttled_page(self, seconds: int) -> HTMLResponse:
        return self.error(
            429,
            "Too many failed attempts",
            f"Too many wrong admin tokens came from your address. Wait {seconds} seconds, then try again.",
        )

    async def session_of(self, request: Request) -> str | None:
        """The request's cookie, signed, unexpired and not logged out of (RedisError: that is unknown)."""
        value = request.cookies.get(COOKIE)
        if not session_valid(self.tokens(), value, self.clock()):
            return None
        parts = session_parts(value)
        # An open session (no admin token) is anyone's to make: there is nothing to log out of.
        if parts is not None and self.tokens() and await run_in_threadpool(self.sessions.ended, parts[1]):
            return None
        return value

    def sessions_unknown(self, exc: RedisError) -> HTMLResponse:
        log.warning("admin page: sessions unreadable, Redis unavailable (%s)", type(exc).__name__)
        return self.redis_down("relay cannot check your session right now. Try again shortly.")

    def error(self, status: int, title: str, message: str, headers: dict[str, str] | None = None) -> HTMLResponse:
        return error_page(self.clock(), status, title, message, headers)

    async def viewing_session(self, request: Request) -> tuple[str | None, str | None] | Response:
        """(the session or None with the API's header, a fresh one to set), else the answer (login, 429, 503)."""
        try:
            session = await self.session_of(request)
        except RedisError as exc:
            return self.sessions_unknown(exc)
        if session is not None:
            return session, None
        by_header = await self.header_auth(request)
        if isinstance(by_header, Response):
            return by_header
        if by_header:
            return None, None
        if self.tokens():
            return RedirectResponse("/ui/login", 303)
        fresh = new_session(None, self.clock())
        return fresh, fresh

    def redis_down(self, message: str) -> HTMLResponse:
        return self.error(503, "Redis is unavailable", message, headers={"Retry-After": "5"})

    async def read(self, load: Callable[[], T]) -> T | Response:
        """`load()` off the event loop, or the 503 page when Redis fails under it."""
        try:
            return await run_in_threadpool(load)
        except RedisError as exc:
            log.warning("admin page: Redis unavailable (%s)", type(exc).__name__)
            return self.redis_down("relay cannot read its records right now. Try again shortly.")

    def show(self, request: Request, viewing: tuple[str | None, str | None], name: str, **context: Any) -> Response:
        """The page `name`, for the session `viewing_session` found (and set, when fresh)."""
        session, fresh = viewing
        response = render(
            name,
            self.clock(),
            csrf=csrf_token(session) if session else "",
            open_mode=not self.tokens(),
            logged_in=bool(self.tokens()) and session is not None,
            **context,
        )
        if fresh is not None:
            set_session(response, request, fresh)
        return response

    @page_operation(
        "The admin page: counters, the last hour, channels, failed and held deliveries, recent notifications "
        "(query `event`, `before`, `limit`) or the deliveries of its filters (query `state`, `channel`, `kind`)",
        viewed("The page", {400: "Invalid query"}),
    )
    async def page(self, request: Request) -> Response:
        viewing = await self.viewing_session(request)
        if isinstance(viewing, Response):
            return viewing
        try:
            query = PageQuery.of_query(request.query_params)
        except ValueError:
            return self.error(
                400, "Invalid query", "limit must be a number of notifications; before a timestamp; state a state."
            )
        found = await self.read(
            lambda: (self.data.page(query), channel_rows(self.data.redis, self.config(), self.clock()))
        )
        if isinstance(found, Response):
            return found
        data, channels = found
        return self.show(
            request,
            viewing,
            "index.html.j2",
            page=data,
            q=query,
            chart=chart(data.activity),
            chart_size=(WIDTH, HEIGHT),
            anchor=anchor,
            channels=channels,
            channel_names=list(self.config().channels),
            states=list(State),
            trace_link=self.config().tracing.link,
            event_filter=query.event,
            view_max=DELIVERIES_OF_ONE,
        )

    @page_operation("The login form", {200: html_answer("The form"), 303: Answer("Logged in already, or open: to /ui")})
    async def login_form(self, request: Request) -> Response:
        try:
            if not self.tokens() or await self.session_of(request) is not None:
                return RedirectResponse("/ui", 303)
        except RedisError as exc:
            return self.sessions_unknown(exc)
        return render("login.html.j2", self.clock(), error=None)

    @page_operation(
        "Log in with an admin token (form field `token`)",
        {
            303: Answer("Logged in: to /ui"),
            401: html_answer("Not an admin token"),
            403: html_answer("Not from this page"),
            429: THROTTLED,
        },
        form=True,
    )
    async def login(self, request: Request) -> Response:
        if not same_origin(request, self.config()):
            return self.error(403, "Forbidden", "The form was not sent from this relay's own page.")
        if not self.tokens():
            return RedirectResponse("/ui", 303)
        if (throttled := await self.guard.check(request, UI, page=self.throttled_page)) is not None:
            return throttled
        form = await read_form(request)
        if isinstance(form, Response):
            return form
        token = matching_token(self.tokens(), form.get("token", ""))
        if token is None:
            await self.guard.failed(request, UI, "not an admin token")
            return render("login.html.j2", self.clock(), 401, error="That is not one of this relay's admin tokens.")
        response = RedirectResponse("/ui", 303)
        set_session(response, request, new_session(token, self.clock()))
        return response

    @page_operation(
        "Log out (form field `csrf`)",
        {
            303: Answer("Logged out: the session is ended on every replica"),
            403: html_answer("Not from this page"),
            503: html_answer("Redis is unavailable: not logged out"),
        },
        form=True,
    )
    async def logout(self, request: Request) -> Response:
        response = RedirectResponse("/ui/login" if self.tokens() else "/ui", 303)
        session = request.cookies.get(COOKIE)
        form = await read_form(request)
        if isinstance(form, Response):
            return form
        if not (session and same_origin(request, self.config()) and csrf_ok(session, form)):
            return self.error(403, "Forbidden", "Log out from the admin page itself.")
        parts = session_parts(session)
        if parts is not None and self.tokens() and session_valid(self.tokens(), session, self.clock()):
            try:  # Ended in Redis, not only forgotten by this browser: a copy of the cookie opens nothing either.
                await run_in_threadpool(self.sessions.end, parts[1], parts[0], self.clock())
            except RedisError as exc:
                log.warning("admin page: logout failed, Redis unavailable (%s)", type(exc).__name__)
                return self.redis_down("You are still logged in: relay cannot end the session right now. Retry.")
        clear_session(response, request)
        return response

    async def posted_form(self, request: Request, what: str) -> dict[str, str] | Response:
        """A button's form, from a session with its CSRF token and this origin, or with the API's header."""
        by_header = await self.header_auth(request)
        if isinstance(by_header, Response):
            return by_header
        try:
            session = None if by_header else await self.session_of(request)
        except RedisError as exc:
            return self.sessions_unknown(exc)
        if not by_header and session is None:
            if self.tokens():
                return self.error(401, "Not logged in", f"Your session has ended: log in again, then {what}.")
            return self.error(403, "Forbidden", f"{what.capitalize()} from the admin page itself (reload it first).")
        form = await read_form(request)
        if isinstance(form, Response):
            return form
        if not by_header and (not same_origin(request, self.config()) or session is None or not csrf_ok(session, form)):
            return self.error(
                403, "Forbidden", f"The {what} was not sent from this relay's own page. Reload it and retry."
            )
        return form

    def one_target(self, values: Mapping[str, str], verb: str) -> tuple[str | None, str | None] | Response:
        """The delivery (`id`) or the notification (`eventId`) a button is about, or the 400 page."""
        delivery_id, event_id = values.get("id", "").strip() or None, values.get("eventId", "").strip() or None
        if (delivery_id is None) == (event_id is None):
            return self.error(400, "Invalid request", f"{verb} one delivery (id) or one notification (eventId).")
        return delivery_id, event_id

    async def act(
        self, request: Request, verb: str, done: str, run: Callable[[str | None, str | None], tuple[int, str | None]]
    ) -> Response:
        """A replay or release button: `run` on its target, then back to the page with its notice."""
        form = await self.posted_form(request, verb)
        if isinstance(form, Response):
            return form
        target = self.one_target(form, verb.capitalize())
        if isinstance(target, Response):
            return target
        delivery_id, event_id = target
        try:
            count, owner = await run_in_threadpool(run, delivery_id, event_id)
        except RedisError as exc:
            log.warning("admin page: %s failed, Redis unavailable (%s)", verb, type(exc).__name__)
            return self.error(503, "Redis is unavailable", f"Nothing was {done}. Try again shortly.")
        noun = "held deliveries" if verb == "release" else "deliveries"
        extra = {"eventId": owner, **({"deliveryId": delivery_id} if delivery_id else {})}
        log.info("admin page: %s %d %s", done, count, noun, extra=extra)
        return RedirectResponse(back_to(f"{done}={count}", form, owner), 303)

    @page_operation(
        "Replay one failed delivery (form field `id`) or a notification's (`eventId`); `csrf` with a session",
        posted("Replayed: back to the page", {400: "Not one target"}),
        form=True,
    )
    async def replay(self, request: Request) -> Response:
        attempts = self.config().retry.attempts
        return await self.act(request, "replay", "replayed", lambda d, e: self.data.replay(self.work, attempts, d, e))


def back_to(notice: str, form: Mapping[str, str], owner: str | None) -> str:
    """Back to the button's view, its notice in view (`#notice`) linking to the notification it was about."""
    target = f"/ui?{notice}" + ("&of=" + quote(owner, safe="") if owner else "")
    view = back_query(form)
    return target + ("&" + view if view else "") + "#notice"
