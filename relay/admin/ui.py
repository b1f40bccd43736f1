"""The admin page at /ui: notifications and their deliveries, failures with replay, held deliveries with
release, silences, counters, one delivery in full. Channel URLs and secrets are never shown, only channels'
names."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from relay.admin.channels import channel_rows
from relay.admin.detail import read_detail
from relay.admin.silences import SilenceError, SilenceRequest, create, expire, refusal
from relay.admin.ui_chart import HEIGHT, WIDTH, chart
from relay.admin.ui_query import PageQuery, back_query
from relay.admin.ui_render import THROTTLED, page_operation, posted, render, viewed
from relay.admin.ui_session import (
    COOKIE,
    PageAccess,
    clear_session,
    csrf_ok,
    csrf_token,
    matching_token,
    new_session,
    read_form,
    session_parts,
    session_valid,
    set_session,
)
from relay.admin.ui_view import DELIVERIES_OF_ONE, PageData, anchor
from relay.config import Config
from relay.core.model import State
from relay.silences.store import Silences
from relay.storage.work_queue import WorkQueue
from relay.web.errors import Answered
from relay.web.forms import same_origin
from relay.web.operation import Answer, html_answer
from relay.web.throttle import UI, Guard

log = logging.getLogger("relay.admin.ui")
_SILENCED = "Done: back to the page's silences"


class AdminPage(PageAccess):
    """The page's handlers: who may see or press what is `PageAccess`'s, a refusal raised as its answer."""

    def __init__(
        self,
        data: PageData,
        work: WorkQueue,
        config: Callable[[], Config],
        clock: Callable[[], float],
        guard: Guard,
    ) -> None:
        super().__init__(data.redis, config, clock, guard)
        self.data, self.work = data, work

    def show(self, request: Request, viewing: tuple[str | None, str | None], name: str, **context: Any) -> Response:
        """The page `name`, for the session `viewing` found (and set, when fresh)."""
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
        viewing = await self.viewing(request)
        try:
            query = PageQuery.of_query(request.query_params)
        except ValueError:
            return self.error(
                400, "Invalid query", "limit must be a number of notifications; before a timestamp; state a state."
            )
        data, channels = await self.read(
            lambda: (self.data.page(query), channel_rows(self.data.redis, self.config(), self.clock()))
        )
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

    @page_operation(
        "One delivery: its record, the log of its tries, the message it sent",
        viewed("The delivery", {404: "No such delivery"}),
    )
    async def delivery(self, request: Request) -> Response:
        viewing = await self.viewing(request)
        found = await self.read(lambda: read_detail(self.data.store, request.path_params["deliveryId"]))
        if found is None:
            return self.error(404, "No such delivery", "That delivery is unknown, or its record has expired.")
        record, shown = found
        return self.show(
            request,
            viewing,
            "delivery.html.j2",
            d=shown,
            tries=record.attemptLog,  # as stored: `at` in epoch seconds, for the page's own time formats
            created=record.createdAt,
            updated=record.updatedAt,
        )

    @page_operation("The login form", {200: html_answer("The form"), 303: Answer("Logged in already, or open: to /ui")})
    async def login_form(self, request: Request) -> Response:
        if not self.tokens() or await self.session_of(request) is not None:
            return RedirectResponse("/ui", 303)
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
        if not (session and same_origin(request, self.config()) and csrf_ok(session, form)):
            return self.error(403, "Forbidden", "Log out from the admin page itself.")
        parts = session_parts(session)
        if parts is not None and self.tokens() and session_valid(self.tokens(), session, self.clock()):
            # Ended in Redis, not only forgotten by this browser: a copy of the cookie opens nothing either.
            expiry, nonce, _ = parts
            unended = "You are still logged in: relay cannot end the session right now. Retry."
            await self.read(lambda: self.sessions.end(nonce, expiry, self.clock()), unended)
        clear_session(response, request)
        return response

    def one_target(self, values: Mapping[str, str], verb: str) -> tuple[str | None, str | None]:
        """The delivery (`id`) or the notification (`eventId`) a button is about; else Answered, the 400 page."""
        delivery_id, event_id = values.get("id", "").strip() or None, values.get("eventId", "").strip() or None
        if (delivery_id is None) == (event_id is None):
            raise Answered(
                self.error(400, "Invalid request", f"{verb} one delivery (id) or one notification (eventId).")
            )
        return delivery_id, event_id

    async def act(
        self, request: Request, verb: str, done: str, run: Callable[[str | None, str | None], tuple[int, str | None]]
    ) -> Response:
        """A replay or release button: `run` on its target, then back to the page with its notice."""
        form = await self.posted_form(request, verb)
        delivery_id, event_id = self.one_target(form, verb.capitalize())
        count, owner = await self.read(lambda: run(delivery_id, event_id), f"Nothing was {done}. Try again shortly.")
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

    @page_operation(
        "What a release would send now: one held delivery (query `id`) or a notification's (`eventId`)",
        viewed("The confirmation, with the Release button", {400: "Not one target"}),
    )
    async def confirm_release(self, request: Request) -> Response:
        """With no JavaScript, a page of its own, counted by a dry run of the release."""
        viewing = await self.viewing(request)
        target = self.one_target(request.query_params, "Release")
        data = self.data
        rows, count = await self.read(
            lambda: (data.held_of(*target), data.release(self.work, *target, dry_run=True)[0])
        )
        return self.show(
            request,
            viewing,
            "release.html.j2",
            rows=rows,
            count=count,
            delivery_id=target[0],
            event_id=target[1],
            view=(request.query_params.get("view") or "").strip() or None,
            back_query=back_query(request.query_params),
        )

    @page_operation(
        "Send held deliveries now: one (form field `id`) or a notification's (`eventId`); `csrf` with a session",
        posted("Released: back to the page", {400: "Not one target"}),
        form=True,
    )
    async def release(self, request: Request) -> Response:
        return await self.act(request, "release", "released", lambda d, e: self.data.release(self.work, d, e))

    @page_operation(
        "Add a silence: `matchers` (one a line), `duration`, `comment`, `createdBy`, `action`; `csrf`",
        posted(_SILENCED, {422: "Not a silence: the page says which field"}),
        form=True,
    )
    async def add_silence(self, request: Request) -> Response:
        form = await self.posted_form(request, "silence")
        body = {
            "matchers": [line.strip() for line in form.get("matchers", "").splitlines() if line.strip()],
            "duration": form.get("duration", "").strip() or None,
            "createdBy": form.get("createdBy", "").strip() or "admin page",
            "comment": form.get("comment", "").strip(),
            "action": "skip" if form.get("action") == "skip" else "hold",
        }
        now, silences, retention = self.clock(), Silences(self.data.redis), self.data.store.retention
        try:
            wanted = SilenceRequest.model_validate(body)
            silence, _ = await self.read(
                lambda: create(silences, wanted, now, retention), "No silence was added. Try again shortly."
            )
        except (ValidationError, SilenceError) as exc:
            return self.error(422, "Not a silence", refusal(exc))
        log.info("admin page: silence %s added by %s: %s", silence.id, silence.createdBy, silence.comment)
        return RedirectResponse("/ui?added=1#silence-notice", 303)  # the notice where the page lands

    @page_operation("Expire a silence now (form field `id`); `csrf`", posted(_SILENCED, {}), form=True)
    async def expire_silence(self, request: Request) -> Response:
        form = await self.posted_form(request, "expiry")
        ident, now, silences = form.get("id", "").strip(), self.clock(), Silences(self.data.redis)
        done = await self.read(
            lambda: expire(silences, self.work, ident, now), "The silence was not expired. Try again shortly."
        )
        if done is None:
            return self.error(404, "No such silence", "That silence is unknown: reload the page.")
        log.info("admin page: silence %s expired, %d held deliveries released", ident, done[1])
        return RedirectResponse(f"/ui?expired={done[1]}#silence-notice", 303)


def back_to(notice: str, form: Mapping[str, str], owner: str | None) -> str:
    """Back to the button's view, its notice in view (`#notice`) linking to the notification it was about."""
    target = f"/ui?{notice}" + ("&of=" + quote(owner, safe="") if owner else "")
    view = back_query(form)
    return target + ("&" + view if view else "") + "#notice"
