"""The admin page's release of held deliveries: a confirmation page (GET), then the release (POST).

The page has no JavaScript, so the confirmation is a page of its own: it lists what would go out, counted
by a dry run of the admin API's own release (`PageData.release`, the same filters and rules), and its form
posts the release with the session's CSRF token, guarded as the replay is.
"""

from __future__ import annotations

import logging

from redis.exceptions import RedisError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from relay.admin.ui import THROTTLED, AdminPage, back_to, html_answer, page_operation, target_of
from relay.admin.ui_query import back_query
from relay.admin.ui_render import render
from relay.admin.ui_session import csrf_token, set_session
from relay.web.operation import Answer, documented

log = logging.getLogger("relay.admin.ui")


class ReleasePage:
    """Release from the admin page; `page` gives the sessions, the data and the queue."""

    def __init__(self, page: AdminPage) -> None:
        self.page = page

    @documented(
        page_operation(
            "What a release would send now: one held delivery (query `id`) or a notification's (`eventId`)",
            {
                200: html_answer("The confirmation, with the Release button"),
                303: Answer("Not logged in: to /ui/login"),
                400: html_answer("Not one target"),
                429: THROTTLED,
                503: html_answer("Redis is unavailable"),
            },
        )
    )
    async def confirm(self, request: Request) -> Response:
        viewing = await self.page.viewing_session(request)
        if isinstance(viewing, Response):
            return viewing
        session, fresh = viewing
        delivery_id, event_id = target_of(request.query_params)
        if (delivery_id is None) == (event_id is None):
            return self.page.error(400, "Invalid request", "Release one delivery (id) or one notification (eventId).")
        data = self.page.data
        try:
            rows = await run_in_threadpool(data.held_of, delivery_id, event_id)
            count, _ = await run_in_threadpool(data.release, self.page.intake, delivery_id, event_id, True)
        except RedisError as exc:
            log.warning("admin page: Redis unavailable (%s)", type(exc).__name__)
            return self.page.redis_down("relay cannot read its records right now. Try again shortly.")
        response = render(
            "release.html.j2",
            self.page.clock(),
            rows=rows,
            count=count,
            delivery_id=delivery_id,
            event_id=event_id,
            view=(request.query_params.get("view") or "").strip() or None,
            back_query=back_query(request.query_params),
            csrf=csrf_token(session) if session else "",
        )
        if fresh is not None:
            set_session(response, request, fresh)
        return response

    @documented(
        page_operation(
            "Send held deliveries now: one (form field `id`) or a notification's (`eventId`); `csrf` with a session",
            {
                303: Answer("Released: back to the page"),
                400: html_answer("Not one target"),
                401: html_answer("Not logged in"),
                403: html_answer("Not from this page"),
                429: THROTTLED,
                503: html_answer("Redis is unavailable"),
            },
            form=True,
        )
    )
    async def release(self, request: Request) -> Response:
        form = await self.page.posted_form(request, "release")
        if isinstance(form, Response):
            return form
        delivery_id, event_id = target_of(form)
        if (delivery_id is None) == (event_id is None):
            return self.page.error(400, "Invalid request", "Release one delivery (id) or one notification (eventId).")
        try:
            count, owner = await run_in_threadpool(
                self.page.data.release, self.page.intake, delivery_id, event_id, False
            )
        except RedisError as exc:
            log.warning("admin page: release failed, Redis unavailable (%s)", type(exc).__name__)
            return self.page.error(503, "Redis is unavailable", "Nothing was released. Try again shortly.")
        log.info(
            "admin page: released %d held deliveries",
            count,
            extra={"eventId": owner, **({"deliveryId": delivery_id} if delivery_id else {})},
        )
        return RedirectResponse(back_to(f"released={count}", form, owner), 303)
