"""GET /api/v1/channels: each channel's health as the workers share it in Redis (relay.outages.store)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from redis import Redis
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from typing_extensions import TypedDict

from relay.admin.api import IsoTime
from relay.config import Config
from relay.outages.store import ChannelStates
from relay.storage.store import iso
from relay.web.operation import Answer, Operation


class ChannelBody(TypedDict):
    """One channel's health. `lastError` is redacted (no URL, token or password); the counts are sends (tries)
    of the last hour by outcome; `p95SendSeconds` is the upper bound of the duration bucket that holds the
    95th percentile of those sends (null without any)."""

    name: str
    state: Literal["up", "down"]
    since: IsoTime | None
    lastError: str | None
    lastSuccessAt: IsoTime | None
    deliveredLastHour: int
    failedLastHour: int
    p95SendSeconds: float | None


class Channels(TypedDict):
    channels: list[ChannelBody]


def channel_rows(redis: Redis, config: Config, clock: float) -> list[dict[str, Any]]:
    """Each configured channel's health, in the config's order (the API's and the admin page's rows)."""
    return [
        {
            "name": h.name,
            "state": "down" if h.down else "up",
            "since": iso(h.since) if h.since is not None else None,
            "lastError": h.last_error,
            "lastSuccessAt": iso(h.last_success_at) if h.last_success_at is not None else None,
            "deliveredLastHour": h.delivered_last_hour,
            "failedLastHour": h.failed_last_hour,
            "p95SendSeconds": h.p95_send_seconds,
        }
        for h in ChannelStates(redis).health(list(config.channels), clock)
    ]


class ChannelsApi:
    def __init__(self, redis: Redis, config: Callable[[], Config], clock: Callable[[], float]) -> None:
        self.redis, self.config, self.clock = redis, config, clock

    @Operation(
        "Each channel's health: up or down (an outage), its last error and success, its sends of the last hour",
        {200: Answer("The configured channels, in the config's order", Channels)},
        errors=(401, 429, 503),
    )
    async def channels(self, request: Request) -> Response:
        rows = await run_in_threadpool(channel_rows, self.redis, self.config(), self.clock())
        return JSONResponse({"channels": rows})
