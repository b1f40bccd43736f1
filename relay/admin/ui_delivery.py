"""The admin page's view of one delivery (/ui/deliveries/{deliveryId}): what GET /api/v1/deliveries/{id}
answers (relay.admin.detail), as a page: its record, the log of its tries, the message it sent. Every table of
the admin page links a delivery here."""

from __future__ import annotations

import logging

from redis.exceptions import RedisError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from relay.admin.detail import read_detail
from relay.admin.ui import THROTTLED, AdminPage, html_answer, page_operation
from relay.admin.ui_render import render
from relay.admin.ui_session import csrf_token, set_session
from relay.web.operation import Answer, documented

log = logging.getLogger("relay.admin.ui")


class DeliveryPage:
    """One delivery; `page` gives the sessions and the records."""

    def __init__(self, page: AdminPage) -> None:
        self.page = page

    @documented(
        page_operation(
            "One delivery: its record, the log of its tries, the message it sent",
            {
                200: html_answer("The delivery"),
                303: Answer("Not logged in: to /ui/login"),
                404: html_answer("No such delivery"),
                429: THROTTLED,
                503: html_answer("Redis is unavailable"),
            },
        )
    )
    async def show(self, request: Request) -> Response:
        viewing = await self.page.viewing_session(request)
        if isinstance(viewing, Response):
            return viewing
        session, fresh = viewing
        delivery_id = request.path_params["deliveryId"]
        try:
            found = await run_in_threadpool(read_detail, self.page.data.store, delivery_id)
        except RedisError as exc:
            log.warning("admin page: Redis unavailable (%s)", type(exc).__name__)
            return self.page.redis_down("relay cannot read its records right now. Try again shortly.")
        if found is None:
            return self.page.error(404, "No such delivery", "That delivery is unknown, or its record has expired.")
        record, shown = found
        response = render(
            "delivery.html.j2",
            self.page.clock(),
            d=shown,
            tries=record.attemptLog,  # as stored: `at` in epoch seconds, for the page's own time formats
            created=record.createdAt,
            updated=record.updatedAt,
            csrf=csrf_token(session) if session else "",
            open_mode=not self.page.tokens(),
            logged_in=bool(self.page.tokens()) and session is not None,
        )
        if fresh is not None:
            set_session(response, request, fresh)
        return response
