"""One delivery in full (GET /api/v1/deliveries/{deliveryId}, and the page /ui/deliveries/{deliveryId})."""

from __future__ import annotations

from typing import Any, NotRequired

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from typing_extensions import TypedDict  # pydantic reads only these TypedDicts on Python 3.11

from relay.admin.api import Delivery, IsoTime
from relay.core.model import Delivery as Record
from relay.core.model import Message, Notification
from relay.core.rendering import PLATFORM
from relay.storage.store import Store, iso
from relay.web.errors import error_response
from relay.web.operation import Answer, Operation


class Attempt(TypedDict):
    """One try (the last 20 are kept): when, what it came to, what the service answered, how long it took."""

    at: IsoTime
    outcome: str  # delivered, transient (tried again while tries are left), permanent
    status: int | None  # the HTTP status or SMTP reply code the service answered, when it answered
    said: str | None  # the service's own words (an HTTP reason and answer, an SMTP reply), bounded
    error: str | None  # relay's account of a failure (as `lastError` keeps the last one)
    seconds: float | None  # how long the send took
    probe: NotRequired[bool]  # true: the try that probed its down channel


class Sent(TypedDict):
    """The message the last try sent: its title and text (an e-mail's plain part), the person's link tokens
    scrubbed, the text cut at 8,000 characters."""

    title: str
    text: str


class DeliveryDetail(Delivery):
    """A delivery (as listed, with its eventId and kind), the log of its tries and the message it sent."""

    attemptLog: list[Attempt]
    message: Sent | None  # None until it was tried


def detail(record: Record, given: Message | None = None) -> dict[str, Any]:
    """What GET /api/v1/deliveries/{deliveryId} answers for a record; `given`: its message in the payload."""
    found = record.public(with_event=True)
    found["attemptLog"] = [{**entry, "at": iso(float(entry.get("at") or 0))} for entry in record.attemptLog]
    found["message"] = sent_message(record, given)
    return found


def _platform_text(record: Record) -> bool:
    """The last try sent its message's own title or text, which the payload keeps, not the record."""
    tried = record.attempts > 0 or bool(record.attemptLog)
    return tried and record.templateUsed == PLATFORM and (record.sentTitle is None or record.sentText is None)


def sent_message(record: Record, given: Message | None) -> Sent | None:
    """The message the record's last try sent (None until one was): as it keeps it, or its message's own."""
    if _platform_text(record) and given is not None:
        title = record.sentTitle if record.sentTitle is not None else given.title
        text = record.sentText if record.sentText is not None else given.message
        return Sent(title=title or "", text=text or "")
    tried = record.sentTitle is not None or record.sentText is not None
    return Sent(title=record.sentTitle or "", text=record.sentText or "") if tried else None


def read_detail(store: Store, delivery_id: str) -> tuple[Record, dict[str, Any]] | None:
    """The record and what the API answers for it (None: no such record), its message read from the payload."""
    record = store.delivery(delivery_id)
    if record is None:
        return None
    given = None
    if _platform_text(record) and (event := store.event(record.eventId)) is not None:
        try:
            messages = Notification.model_validate_json(event.payload).messages
        except ValueError:  # a payload that no longer reads: the message is shown as the record keeps it
            messages = []
        given = messages[record.messageIndex] if record.messageIndex < len(messages) else None
    return record, detail(record, given)


class DeliveryApi:
    def __init__(self, store: Store) -> None:
        self.store = store

    @Operation(
        "One delivery: its record, the log of its tries and the message it sent",
        {200: Answer("The delivery, `attemptLog` (its last 20 tries, oldest first) and `message`", DeliveryDetail)},
        errors=(401, 404, 429, 503),
    )
    async def get(self, request: Request) -> Response:
        delivery_id = request.path_params["deliveryId"]
        found = await run_in_threadpool(read_detail, self.store, delivery_id)
        if found is None:
            return error_response(
                404,
                [f"no delivery with id {delivery_id!r}"],
                "That delivery is unknown or has expired.",
                field="deliveryId",
                solutions=[
                    "Check the id (GET /api/v1/deliveries lists them); records are kept for the configured retention."
                ],
            )
        return JSONResponse(found[1])
