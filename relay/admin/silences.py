"""Silences through the admin API (/api/v1/silences); `create` and `expire` serve the CLI and the page too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator
from pydantic.json_schema import SkipJsonSchema
from redis import Redis
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from typing_extensions import TypedDict

from relay.admin.access import json_object
from relay.config.durations import parse_duration
from relay.config.matchers import MatcherError
from relay.core.times import LAST, Instant
from relay.delivery.holding import Scheduling
from relay.silences.model import MAX_MATCHERS, MAX_SILENCES, MAX_TEXT, Silence, compile_matchers, past_retention
from relay.silences.store import Silences, new_id
from relay.storage.store import Store
from relay.web.errors import dotted, error_response, validation_response
from relay.web.operation import Answer, Operation

STATES = ("active", "pending", "expired")
MAX_BODY = 64 * 1024


class SilenceRequest(BaseModel):
    """POST /api/v1/silences: what to mute, for how long, who and why. `endsAt` or `duration`."""

    model_config = ConfigDict(extra="forbid")

    matchers: list[StrictStr] = Field(
        min_length=1,
        max_length=MAX_MATCHERS,
        description='the routes\' syntax: kind, recipientType, channel, body.*, like kind=~"notification:quality-.*"',
    )
    startsAt: Instant = Field(None, description="default: now")
    endsAt: Instant = None
    duration: StrictStr | SkipJsonSchema[None] = Field(None, description="from startsAt: 30m, 2h, 1d")
    createdBy: StrictStr = Field(min_length=1, max_length=MAX_TEXT)
    comment: StrictStr = Field(min_length=1, max_length=MAX_TEXT)
    action: Literal["hold", "skip"] = "hold"

    @field_validator("matchers")
    @classmethod
    def _compiles(cls, value: list[str]) -> list[str]:
        for line in value:
            try:
                found = compile_matchers([line])
            except MatcherError as exc:
                raise ValueError(str(exc)) from None
            if not found:  # `""` or `{}`: no matcher, which would silence everything unseen
                raise ValueError(f'matcher {line!r} is empty; write one like channel="owners-slack"')
        return value

    @field_validator("duration")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None and parse_duration(value) <= 0:
            raise ValueError("the duration must be more than 0")
        return value


class SilenceError(ValueError):
    """A request that makes no silence: the field and what is wrong with it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def refusal(exc: ValidationError | SilenceError) -> str:
    """A refused silence in one line, its field first: the API's problem, the page's and the CLI's words."""
    if isinstance(exc, SilenceError):
        return f"{exc.field}: {exc}"
    first = exc.errors(include_url=False)[0]
    return f"{dotted(first['loc']) or 'silence'}: {str(first['msg']).removeprefix('Value error, ')}"


def create(silences: Silences, request: SilenceRequest, now: float, retention: float) -> tuple[Silence, list[str]]:
    """Store a new silence: it, and its warnings (a hold longer than `retention`); else SilenceError."""
    starts = request.startsAt if request.startsAt is not None else now
    if (request.endsAt is None) == (request.duration is None):
        raise SilenceError("endsAt", "give endsAt or duration (one of them)")
    ends = request.endsAt if request.endsAt is not None else starts + parse_duration(str(request.duration))
    if ends > LAST:
        raise SilenceError("endsAt", "the silence would end after the year 9999")
    if ends <= now:
        raise SilenceError("endsAt", "endsAt is in the past: the silence would never be active")
    if ends <= starts:
        raise SilenceError("endsAt", "endsAt must be after startsAt")
    silences.prune(now)
    if silences.unexpired(now) >= MAX_SILENCES:
        raise SilenceError("matchers", f"{MAX_SILENCES} silences are active or pending already: expire some first")
    silence = Silence(
        new_id(), tuple(request.matchers), starts, ends, request.createdBy, request.comment, request.action
    )
    silences.put(silence)
    return silence, [w for w in [past_retention(silence, now, retention)] if w]


def expire(silences: Silences, schedule: Scheduling, ident: str, now: float) -> tuple[Silence, int] | None:
    """End a silence now and make what it held due, for the workers to ask the gates again: it and how many
    (None: no such silence). As fast with 20,000 held as with none; an unrelated one reads nothing held."""
    silence = silences.get(ident)
    if silence is None:
        return None
    if silence.endsAt > now:
        silence = silence.ended(now)
        silences.put(silence)
    held = silences.held(ident)
    schedule.enqueue_deliveries(held)
    return silence, len(held)


def listed(silences: Silences, states: tuple[str, ...], now: float) -> list[dict[str, Any]]:
    return [s.public(now) for s in silences.all() if s.state(now) in states]


class SilenceBody(TypedDict):
    """A silence, with its state now."""

    id: str
    matchers: list[str]
    startsAt: str
    endsAt: str
    createdBy: str
    comment: str
    action: Literal["hold", "skip"]
    state: Literal["active", "pending", "expired"]
    released: NotRequired[int]  # an expiry: the held deliveries it made due at once
    warnings: NotRequired[list[str]]  # a creation: what its maker should know (a hold longer than retention)


class SilenceList(TypedDict):
    silences: list[SilenceBody]


class SilenceQuery(BaseModel):
    state: str | SkipJsonSchema[None] = Field(
        None, description="comma-separated: active, pending, expired (default: all)", pattern=r"^[a-z,]*$"
    )


class SilencesApi:
    def __init__(self, store: Store, redis: Redis, schedule: Scheduling, clock: Callable[[], float]) -> None:
        self.store, self.silences, self.schedule, self.clock = store, Silences(redis), schedule, clock

    @Operation(
        "Silence what matches, for a while: held (or skipped) while it lasts",
        {201: Answer("The silence", SilenceBody)},
        errors=(401, 413, 415, 422, 429, 503),
        request=SilenceRequest,
    )
    async def create(self, request: Request) -> Response:
        body = await json_object(request, "silence", MAX_BODY, solution="Send matchers, endsAt or duration, ...")
        try:
            wanted = SilenceRequest.model_validate(body)
            now = self.clock()
            silence, warned = await run_in_threadpool(create, self.silences, wanted, now, self.store.retention)
        except ValidationError as exc:
            return validation_response(exc, "silence")
        except SilenceError as exc:
            return error_response(422, [refusal(exc)], f"Invalid silence: {refusal(exc)}", field=exc.field)
        return JSONResponse({**silence.public(now), "warnings": warned}, 201)

    @Operation(
        "Silences, oldest start first, each with its state",
        {200: Answer("The silences", SilenceList)},
        errors=(401, 422, 429, 503),
        query=SilenceQuery,
    )
    async def list(self, request: Request) -> Response:
        raw = request.query_params.get("state") or ",".join(STATES)
        states = tuple(s.strip() for s in raw.split(",") if s.strip())
        wrong = [s for s in states if s not in STATES]
        if wrong:
            return error_response(
                422,
                [f"state: {wrong[0]!r} is not one of {', '.join(STATES)}"],
                "Unknown silence state.",
                field="state",
                solutions=["Ask for active, pending or expired, comma-separated."],
            )
        found = await run_in_threadpool(listed, self.silences, states, self.clock())
        return JSONResponse({"silences": found})

    @Operation(
        "Expire a silence now: what it held goes out",
        {200: Answer("The silence, expired, and how many held deliveries it let go", SilenceBody)},
        errors=(401, 404, 429, 503),
    )
    async def expire(self, request: Request) -> Response:
        ident = request.path_params["id"]
        now = self.clock()
        done = await run_in_threadpool(expire, self.silences, self.schedule, ident, now)
        if done is None:
            return error_response(
                404,
                [f"no readable silence with id {ident!r}"],
                "That silence is unknown (expired ones are kept 5 days), or unreadable (the log names it).",
                field="id",
                solutions=["List them: GET /api/v1/silences."],
            )
        silence, released = done
        return JSONResponse({**silence.public(now), "released": released})
