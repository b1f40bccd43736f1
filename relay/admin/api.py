"""The admin API (/api/v1/*): one notification's record, listings, replays and config reloads."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Annotated, Any, NotRequired

from pydantic import ValidationError, WithJsonSchema
from redis import Redis
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from typing_extensions import TypedDict  # pydantic reads only these TypedDicts on Python 3.11

from relay.admin.access import json_object
from relay.admin.selection import (
    EVENT_PAGE,
    DeliveryQuery,
    EventQuery,
    Filters,
    ReleaseRequest,
    ReplayRequest,
)
from relay.config import Config, ConfigError
from relay.core.model import State, trace_id
from relay.storage import requeue
from relay.storage.generations import CONFIG_APPLIED, CONFIG_GENERATION, heartbeat_seconds
from relay.storage.store import Store, iso
from relay.storage.work_queue import WorkQueue
from relay.web.errors import error_response, validation_response
from relay.web.operation import Answer, Operation

log = logging.getLogger("relay.admin.api")
IsoTime = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]


class Thread(TypedDict):
    key: str
    root: str | None  # the delivery id of the conversation's first message (None: not sent in it yet)
    reply: bool


# The schema of what `relay.core.model.Delivery.public` answers (its docstring is the schema's description).
class Delivery(TypedDict):
    """A delivery as the API shows it."""

    id: str
    recipientType: str | None
    recipient: str | None
    channel: str
    state: State
    attempts: int
    lastError: str | None
    createdAt: IsoTime
    updatedAt: IsoTime
    eventId: NotRequired[str]  # in listings
    kind: NotRequired[str]  # in listings
    address: NotRequired[str | None]
    template: NotRequired[str]
    attemptTimes: NotRequired[list[IsoTime]]
    fallbackFor: NotRequired[str]
    fellBackFrom: NotRequired[str]  # its message's recipientType_v2, no route naming it: recipientType was used
    route: NotRequired[str | None]  # the route that planned it: its name, `routes[i]`, or `default`
    members: NotRequired[list[str]]  # an expanded group's member deliveries
    notBefore: NotRequired[IsoTime]  # a held delivery: when its route's time intervals let it go out
    items: NotRequired[list[str]]  # a digest: the deliveries it carries, in order of arrival
    digest: NotRequired[str]  # a delivery gathered into a digest: the digest's id
    traceId: NotRequired[str]  # with tracing on: the trace its tries are spans of (README, "Tracing")
    thread: NotRequired[Thread]  # a threaded route's delivery: its conversation (docs/delivery.md, "Conversations")


class Event(TypedDict):
    eventId: str
    kind: str
    receivedAt: IsoTime
    traceId: NotRequired[str]  # with tracing on: the notification's trace, from its intake on
    deliveries: list[Delivery]
    next: NotRequired[str]  # more deliveries follow: the `cursor` of the next page (absent on the last one)


class NotReplayed(TypedDict):
    id: str
    state: str  # the delivery's state, or "unknown"


class Replayed(TypedDict):
    replayed: int
    dryRun: bool
    notReplayed: list[NotReplayed]


class Released(TypedDict):
    released: int
    dryRun: bool
    notReleased: list[NotReplayed]


class Reloaded(TypedDict):
    reloaded: bool
    generation: int
    notes: list[str]
    applied: bool  # every live worker plans and sends with the new config (answered then, or at the wait's end)
    workers: int  # workers alive (a heartbeat within dead_worker_after)
    behind: list[str]  # those that do not yet (or kept their old config: their log says why)


def event_page(store: Store, event_id: str, start: int = 0, count: int = EVENT_PAGE) -> Event | None:
    """The notification with `count` of its deliveries from the `start`-th, and `next` when more follow."""
    event = store.event(event_id)
    if event is None:
        return None
    ids = event.deliveries[start : start + count]  # ids are only added, at the end: a position stays valid
    deliveries: list[Any] = [r.public() for r in store.deliveries(ids) if r is not None]
    found: dict[str, Any] = {"eventId": event.eventId, "kind": event.kind, "receivedAt": iso(event.receivedAt)}
    traced = trace_id(event.trace)
    if traced:
        found["traceId"] = traced
    found["deliveries"] = deliveries
    if start + len(ids) < len(event.deliveries):
        found["next"] = str(start + len(ids))
    return found  # type: ignore[return-value]


class AdminApi:
    """The handlers take their dependencies here; the config is read at each request (a reload changes it)."""

    def __init__(
        self,
        store: Store,
        work: WorkQueue,
        redis: Redis,
        config: Callable[[], Config],
        reload: Callable[[], list[str]],
    ) -> None:
        self.store, self.work, self.redis, self.config, self.reload_config = store, work, redis, config, reload

    @Operation(
        "What happened to one notification",
        {200: Answer("The notification and a page of its deliveries (`next`: more follow)", Event)},
        errors=(401, 404, 422, 429, 503),
        query=EventQuery,
    )
    async def event(self, request: Request) -> Response:
        event_id = request.path_params["eventId"]
        try:
            query = EventQuery.of(request.query_params)
        except ValidationError as exc:
            return validation_response(exc, "query")
        found = await run_in_threadpool(event_page, self.store, event_id, query.start, query.count)
        if found is None:
            return error_response(
                404,
                [f"no notification with eventId {event_id!r}"],
                "That notification is unknown or has expired.",
                field="eventId",
                solutions=["Check the eventId; records are kept for the configured retention."],
            )
        return JSONResponse(found)

    @Operation(
        "Deliveries, newest first",
        {200: Answer("Deliveries, newest first, each with its eventId and kind", list[Delivery])},
        errors=(401, 422, 429, 503),
        query=DeliveryQuery,
    )
    async def deliveries(self, request: Request) -> Response:
        try:
            query = DeliveryQuery.of(request.query_params)
        except ValidationError as exc:
            return validation_response(exc, "query")
        page = Filters.from_query(query, self.store.clock()).page
        found, nxt = await run_in_threadpool(page, self.store, query.limit, query.cursor)
        # SPEC: "list deliveries": the answer is the list itself, newest first; the next page in a Link header.
        more = {"Link": f'<{request.url.include_query_params(cursor=nxt)}>; rel="next"'} if nxt else None
        return JSONResponse([r.public(with_event=True) for r in found], headers=more)

    @Operation(
        "Requeue failed deliveries (never a delivered one)",
        {200: Answer("How many were requeued", Replayed)},
        errors=(400, 401, 415, 422, 429, 503),
        request=ReplayRequest,
        request_required=False,
    )
    async def replay(self, request: Request) -> Response:
        return await self._requeue(request, State.FAILED)

    @Operation(
        "Send held deliveries now, past quiet hours, a person's hours, a digest's window or a silence",
        {200: Answer("How many were released", Released)},
        errors=(400, 401, 415, 422, 429, 503),
        request=ReleaseRequest,
        request_required=False,
    )
    async def release(self, request: Request) -> Response:
        return await self._requeue(request, State.HELD)

    async def _requeue(self, request: Request, state: State) -> Response:
        """A replay (of failed deliveries) or a release (of held ones): how many went, and those named that did not."""
        what, done = ("replay", "replayed") if state is State.FAILED else ("release", "released")
        body = await json_object(request, what, empty={})
        try:
            wanted = (ReplayRequest if state is State.FAILED else ReleaseRequest).model_validate(body)
        except ValidationError as exc:
            return validation_response(exc, f"{what} request")
        attempts = self.config().retry.attempts

        def send_again() -> tuple[int, list[dict[str, str]]]:
            chosen, passed = Filters.from_body(wanted, self.store.clock(), state).chosen(self.store)
            if state is State.FAILED:
                return requeue.replay(self.work, chosen, attempts, wanted.dryRun), passed
            return requeue.release(self.work, chosen, wanted.dryRun), passed

        count, passed = await run_in_threadpool(send_again)
        return JSONResponse({done: count, "dryRun": wanted.dryRun, f"not{done.capitalize()}": passed})

    @Operation(
        "Read the config file again (routes, channels, templates, tokens); answers once every live worker "
        "uses it (at most a heartbeat and a second later: `applied`, `behind`)",
        {200: Answer("Reloaded", Reloaded)},
        errors=(401, 422, 429, 503),
    )
    async def reload(self, request: Request) -> Response:
        try:
            notes = await run_in_threadpool(self.reload_config)
        except ConfigError as exc:
            log.error("config reload refused, the running config is kept: %s", exc)
            return error_response(
                422,
                [str(exc)],
                "The new config is invalid; the running config is kept.",
                solutions=["Fix the file (`relay check` says what is wrong) and reload again."],
            )
        # Workers (any machine) watch this counter and read their own config file again.
        generation = await run_in_threadpool(self.redis.incr, CONFIG_GENERATION)
        log.info("config reloaded (generation %s)", generation)
        alive, behind = await workers_behind(self.store, self.redis, generation, heartbeat_seconds(self.config()) + 1)
        if behind:
            log.warning("config generation %s not yet used by workers %s", generation, ", ".join(behind))
        answer = {"reloaded": True, "generation": generation, "notes": notes}
        return JSONResponse({**answer, "applied": not behind, "workers": alive, "behind": behind})


async def workers_behind(store: Store, redis: Redis, generation: int, within: float) -> tuple[int, list[str]]:
    """Wait, `within` s at most, until every live worker says it runs with `generation`: the live, those behind."""
    deadline = time.monotonic() + within
    while True:
        alive = await run_in_threadpool(store.live_workers)
        said = await run_in_threadpool(redis.hmget, CONFIG_APPLIED, alive) if alive else []
        behind = sorted(n for n, g in zip(alive, said, strict=True) if g is None or int(g) < generation)
        if not behind or time.monotonic() >= deadline:
            return len(alive), behind
        await asyncio.sleep(0.05)
