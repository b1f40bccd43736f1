"""The admin page's view of one delivery (/ui/deliveries/{deliveryId}): relay.admin.detail's, as a page."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from relay.admin.detail import read_detail
from relay.admin.ui import AdminPage
from relay.admin.ui_render import page_operation, viewed


class DeliveryPage:
    def __init__(self, page: AdminPage) -> None:
        self.page = page

    @page_operation(
        "One delivery: its record, the log of its tries, the message it sent",
        viewed("The delivery", {404: "No such delivery"}),
    )
    async def show(self, request: Request) -> Response:
        viewing = await self.page.viewing_session(request)
        if isinstance(viewing, Response):
            return viewing
        found = await self.page.read(lambda: read_detail(self.page.data.store, request.path_params["deliveryId"]))
        if isinstance(found, Response):
            return found
        if found is None:
            return self.page.error(404, "No such delivery", "That delivery is unknown, or its record has expired.")
        record, shown = found
        return self.page.show(
            request,
            viewing,
            "delivery.html.j2",
            d=shown,
            tries=record.attemptLog,  # as stored: `at` in epoch seconds, for the page's own time formats
            created=record.createdAt,
            updated=record.updatedAt,
        )
