"""The durable peer of issue 26: what a user would write from the same design card in an afternoon.

A Starlette handler checks the bearer token, validates the payload with a small pydantic model, drops a
repeated eventId (`SET NX`) and enqueues one RQ job per message with RQ's public API (`prepare_data`,
`enqueue_many` in one transaction), then answers 202. The stock `rq worker` (two processes) sends each
message through Apprise (peer_worker.py), with RQ's Retry. Redis calls are blocking (RQ is sync), so the
handler runs them in Starlette's thread pool. Routing is relay's bench config: kind
`notification:bench-slow` to the slow channel, everything else to the instant one.

    BENCH_PEER_TOKEN=... python bench/peer_app.py PORT REDIS_URL INSTANT_URL SLOW_URL
"""

from __future__ import annotations

import hmac
import json
import os
import sys
from typing import Any

import uvicorn
from pydantic import BaseModel, Field, ValidationError
from redis import Redis
from rq import Queue, Retry
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

SLOW_KIND = "notification:bench-slow"
JOB = "bench.peer_worker.send_message"  # by name: the API need not import Apprise
RETRY = Retry(max=3, interval=[1, 5, 10])
DEDUP_SECONDS = 7 * 24 * 3600


class Message(BaseModel):
    recipientType: str | None = None
    recipientType_v2: str | None = None
    recipients: list[dict[str, Any]] = []
    title: str = ""
    message: str


class Metadata(BaseModel):
    eventId: str = Field(min_length=1, max_length=200)
    createdAt: str | None = None


class Notification(BaseModel):
    kind: str = Field(pattern=r"^notification:")
    sender: str | None = None
    body: dict[str, Any] = {}
    messages: list[Message] = Field(min_length=1)
    metadata: Metadata


def create_app(redis_url: str, routes: dict[str, str], default_url: str, token: str) -> Starlette:
    conn = Redis.from_url(redis_url)
    queue = Queue("default", connection=conn)
    expected = f"Bearer {token}".encode()

    def accept(notification: Notification) -> bool:
        """Durable once this returns True: the eventId is marked and every message is a queued job."""
        event_id = notification.metadata.eventId
        if not conn.set(f"peer:event:{event_id}", 1, nx=True, ex=DEDUP_SECONDS):
            return False
        url = routes.get(notification.kind, default_url)
        jobs = [Queue.prepare_data(JOB, (url, m.title, m.message), retry=RETRY) for m in notification.messages]
        with conn.pipeline() as pipe:
            queue.enqueue_many(jobs, pipeline=pipe)
            pipe.execute()
        return True

    async def webhook(request: Request) -> Response:
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            return JSONResponse({"error": "unauthorized"}, 401)
        raw = await request.body()
        try:
            notification = Notification.model_validate_json(raw)
        except ValidationError as exc:
            errors = json.loads(exc.json(include_url=False, include_input=False))
            return JSONResponse({"error": "invalid payload", "details": errors}, 422)
        fresh = await run_in_threadpool(accept, notification)
        status = "accepted" if fresh else "duplicate"
        return JSONResponse({"eventId": notification.metadata.eventId, "status": status}, 202)

    return Starlette(routes=[Route("/webhook", webhook, methods=["POST"])], max_body_size=1024 * 1024)


if __name__ == "__main__":
    port, redis_url, instant, slow = sys.argv[1:5]
    app = create_app(redis_url, {SLOW_KIND: slow}, instant, os.environ["BENCH_PEER_TOKEN"])
    # relay api's uvicorn settings, as P1 compares like with like.
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_config=None, access_log=False, lifespan="off", http="h11")
