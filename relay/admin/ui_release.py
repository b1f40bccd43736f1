"""The admin page's release of held deliveries: a confirmation page (GET: with no JavaScript, a page of its
own, counted by a dry run of the release), then the release (POST)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from relay.admin.ui import AdminPage
from relay.admin.ui_query import back_query
from relay.admin.ui_render import page_operation, posted, viewed


class ReleasePage:
    def __init__(self, page: AdminPage) -> None:
        self.page = page

    @page_operation(
        "What a release would send now: one held delivery (query `id`) or a notification's (`eventId`)",
        viewed("The confirmation, with the Release button", {400: "Not one target"}),
    )
    async def confirm(self, request: Request) -> Response:
        viewing = await self.page.viewing_session(request)
        if isinstance(viewing, Response):
            return viewing
        target = self.page.one_target(request.query_params, "Release")
        if isinstance(target, Response):
            return target
        data = self.page.data
        found = await self.page.read(
            lambda: (data.held_of(*target), data.release(self.page.work, *target, dry_run=True)[0])
        )
        if isinstance(found, Response):
            return found
        return self.page.show(
            request,
            viewing,
            "release.html.j2",
            rows=found[0],
            count=found[1],
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
        return await self.page.act(
            request, "release", "released", lambda d, e: self.page.data.release(self.page.work, d, e)
        )
