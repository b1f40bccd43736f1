"""P2's stack floor: the least a webhook -> Redis -> worker -> Apprise pipeline on relay's stack costs.

No dedup, no delivery records, no RQ, no routing or templates: the API validates the notification with
relay's pydantic model and stores it with one Redis script (payload and queue push); one worker process
pops it, reads it back and sends its first message through Apprise (relay's send, pooled connections).
What relay's latency cannot go below on this machine while keeping SPEC's flow (an API that makes the
notification durable, then a worker that sends it).

    python bench/floor.py api PORT REDIS_URL
    python bench/floor.py worker REDIS_URL CHANNEL_URL
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

STORE = "redis.call('HSET', KEYS[1], 'payload', ARGV[1]); redis.call('RPUSH', KEYS[2], ARGV[2]); return 1"
QUEUE = "floor:queue"


def api(port: int, redis_url: str) -> None:
    import uvicorn
    from redis.asyncio import Redis
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from relay.config import LimitsConfig
    from relay.intake.webhook import validate_notification

    client = Redis.from_url(redis_url)
    limits = LimitsConfig()

    async def webhook(request: Request) -> Response:
        raw = await request.body()
        event_id = validate_notification(raw, limits).event_id
        await client.eval(STORE, 2, f"floor:event:{event_id}", QUEUE, raw, event_id)
        return JSONResponse({"eventId": event_id, "status": "accepted"}, 202)

    app = Starlette(routes=[Route("/webhook", webhook, methods=["POST"])])
    # relay api's uvicorn settings.
    uvicorn.run(app, host="127.0.0.1", port=port, log_config=None, access_log=False, lifespan="off", http="h11")


def worker(redis_url: str, channel: str) -> None:
    from redis import Redis

    from relay.delivery.channels import send

    client = Redis.from_url(redis_url, socket_timeout=30)
    while True:
        popped: Any = client.blpop([QUEUE], 1)
        if not popped:
            continue
        raw: Any = client.hget(f"floor:event:{popped[1].decode()}", "payload")
        message = json.loads(raw)["messages"][0]
        send(channel, message["title"], message["message"], "text")


if __name__ == "__main__":
    if sys.argv[1] == "api":
        api(int(sys.argv[2]), sys.argv[3])
    else:
        worker(sys.argv[2], sys.argv[3])
