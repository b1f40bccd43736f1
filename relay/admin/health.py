"""GET /healthz, /readyz and /metrics: is the process alive, can it work, what has it counted."""

from __future__ import annotations

from typing import Any, Literal

from prometheus_client.exposition import choose_encoder
from redis import Redis
from redis.exceptions import RedisError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from typing_extensions import TypedDict  # pydantic reads only these TypedDicts on Python 3.11

from relay.admin.counters import CounterReader
from relay.admin.metrics import metrics_registry
from relay.storage.store import Store
from relay.web.errors import RETRY_AFTER, error_response
from relay.web.operation import Answer, Operation


class Alive(TypedDict):
    status: Literal["ok"]


class Ready(TypedDict):
    status: Literal["ready"]
    redis: str
    workers: int


class Health:
    def __init__(self, redis: Redis, store: Store, counters: CounterReader) -> None:
        self.redis, self.store = redis, store
        self.registry = metrics_registry(lambda: counters.read(scrape=True))

    @Operation("Liveness", {200: Answer("Alive", Alive)})
    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    def ready(self) -> tuple[bool, dict[str, Any]]:
        try:
            self.redis.ping()
            workers = self.store.live_workers()
        except RedisError as exc:
            return False, {"redis": f"unreachable ({type(exc).__name__})", "workers": 0}
        return bool(workers), {"redis": "ok", "workers": len(workers)}

    @Operation("Redis reachable and a worker alive", {200: Answer("Ready", Ready)}, errors=(503,))
    async def readyz(self, request: Request) -> Response:
        ok, detail = await run_in_threadpool(self.ready)
        if ok:
            return JSONResponse({"status": "ready", **detail})
        problem = "Redis is unreachable" if detail["redis"] != "ok" else "no worker alive (dead_worker_after)"
        return error_response(
            503,
            [problem],
            "relay is not ready.",
            problems=[problem],
            solutions=["Check Redis and start `relay worker`."],
            headers={"Retry-After": RETRY_AFTER},
        )

    @Operation("Prometheus metrics", {200: Answer("Text format", {"type": "string"}, media="text/plain")})
    async def metrics(self, request: Request) -> Response:
        # Negotiated as the worker's /metrics (prometheus-client's own app) is: OpenMetrics, with the exemplars, when
        # the scraper's Accept asks for it.
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        text = await run_in_threadpool(encode, self.registry)  # blocking: it reads Redis
        return Response(text, headers={"Content-Type": content_type})
