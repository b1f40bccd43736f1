"""One delivery in full (GET /api/v1/deliveries/{deliveryId}, and the page /ui/deliveries/{deliveryId}): its
record, the log of its last tries and the message its last try sent."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from typing_extensions import TypedDict  # pydantic reads only these TypedDicts on Python 3.11

from relay.admin.api import Delivery, IsoTime
from relay.core.model import Delivery as Record
from relay.storage.store import Store, iso
from relay.web.errors import error_response
from relay.web.operation import ADMIN_SECURITY, Answer, Operation, documented


class Attempt(TypedDict):
    """One try (the last 20 are kept): when, what it came to, what the service answered, how long it took."""

    at: IsoTime
    outcome: str  # delivered, transient (tried again while tries are left), permanent
    status: int | None  # the HTTP status or SMTP reply code the service answered, when it answered
    said: str | None  # the service's own words (an HTTP reason and answer, an SMTP reply), bounded
    error: str | None  # relay's account of a failure (as `lastError` keeps the last one)
    seconds: float | None  # how long the send took


class Sent(TypedDict):
    """The message the last try sent: its title and text (an e-mail's plain part), the person's link tokens
    scrubbed, the text cut at 8,000 characters."""

    title: str
    text: str


class DeliveryDetail(Delivery):
    """A delivery (as listed, with its eventId and kind), the log of its tries and the message it sent."""

    attemptLog: list[Attempt]
    message: Sent | None  # None until it was tried


def detail(record: Record) -> dict[str, Any]:
    """What GET /api/v1/deliveries/{deliveryId} answers for a record."""
    found = record.public(with_event=True)
    found["attemptLog"] = [{**entry, "at": iso(float(entry.get("at") or 0))} for entry in record.attemptLog]
    tried = record.sentTitle is not None or record.sentText is not None
    found["message"] = {"title": record.sentTitle or "", "text": record.sentText or ""} if tried else None
    return found


def unknown(delivery_id: str) -> Response:
    return error_response(
        404,
        [f"no delivery with id {delivery_id!r}"],
        "That delivery is unknown or has expired.",
        field="deliveryId",
        solutions=["Check the id (GET /api/v1/deliveries lists them); records are kept for the configured retention."],
    )


class DeliveryApi:
    def __init__(self, store: Store) -> None:
        self.store = store

    @documented(
        Operation(
            "One delivery: its record, the log of its tries and the message it sent",
            {200: Answer("The delivery, `attemptLog` (its last 20 tries, oldest first) and `message`", DeliveryDetail)},
            errors=(401, 404, 429, 503),
            security=ADMIN_SECURITY,
        )
    )
    async def get(self, request: Request) -> Response:
        delivery_id = request.path_params["deliveryId"]
        record = await run_in_threadpool(self.store.delivery, delivery_id)
        if record is None:
            return unknown(delivery_id)
        return JSONResponse(detail(record))
