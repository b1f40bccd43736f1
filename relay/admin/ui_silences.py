"""The admin page's silences: add one (a form) and expire one (a button), by relay.admin.silences."""

from __future__ import annotations

import logging

from pydantic import ValidationError
from redis.exceptions import RedisError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from relay.admin.silences import SilenceError, SilenceRequest, create, expire, refusal
from relay.admin.ui import AdminPage
from relay.admin.ui_render import page_operation, posted
from relay.silences.store import Silences

log = logging.getLogger("relay.admin.ui")
_DONE = "Done: back to the page's silences"


class SilencesPage:
    def __init__(self, page: AdminPage) -> None:
        self.page = page

    @page_operation(
        "Add a silence: `matchers` (one a line), `duration`, `comment`, `createdBy`, `action`; `csrf`",
        posted(_DONE, {422: "Not a silence: the page says which field"}),
        form=True,
    )
    async def add(self, request: Request) -> Response:
        form = await self.page.posted_form(request, "silence")
        if isinstance(form, Response):
            return form
        body = {
            "matchers": [line.strip() for line in form.get("matchers", "").splitlines() if line.strip()],
            "duration": form.get("duration", "").strip() or None,
            "createdBy": form.get("createdBy", "").strip() or "admin page",
            "comment": form.get("comment", "").strip(),
            "action": "skip" if form.get("action") == "skip" else "hold",
        }
        data, now = self.page.data, self.page.clock()
        try:
            wanted = SilenceRequest.model_validate(body)
            silence, _ = await run_in_threadpool(create, Silences(data.redis), wanted, now, data.store.retention)
        except (ValidationError, SilenceError) as exc:
            return self.page.error(422, "Not a silence", refusal(exc))
        except RedisError as exc:
            log.warning("admin page: silence not added, Redis unavailable (%s)", type(exc).__name__)
            return self.page.redis_down("No silence was added. Try again shortly.")
        log.info("admin page: silence %s added by %s: %s", silence.id, silence.createdBy, silence.comment)
        return RedirectResponse("/ui?added=1#silence-notice", 303)  # the notice where the page lands

    @page_operation("Expire a silence now (form field `id`); `csrf`", posted(_DONE, {}), form=True)
    async def expire(self, request: Request) -> Response:
        form = await self.page.posted_form(request, "expiry")
        if isinstance(form, Response):
            return form
        ident = form.get("id", "").strip()
        try:
            silences = Silences(self.page.data.redis)
            done = await run_in_threadpool(expire, silences, self.page.work, ident, self.page.clock())
        except RedisError as exc:
            log.warning("admin page: silence not expired, Redis unavailable (%s)", type(exc).__name__)
            return self.page.redis_down("The silence was not expired. Try again shortly.")
        if done is None:
            return self.page.error(404, "No such silence", "That silence is unknown: reload the page.")
        log.info("admin page: silence %s expired, %d held deliveries released", ident, done[1])
        return RedirectResponse(f"/ui?expired={done[1]}#silence-notice", 303)
