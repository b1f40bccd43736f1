"""The naive alternative of P3/P4: a synchronous Flask handler that sends every message through Apprise
before it answers (no queue, no durability, no retries). Served by gunicorn's sync workers.

The channel URL comes from BENCH_FLASK_SLOW_URL (kind notification:bench-slow) or BENCH_FLASK_URL.
"""

from __future__ import annotations

import os
from typing import Any

import apprise
from flask import Flask, request

app = Flask(__name__)


@app.post("/webhook")
def webhook() -> tuple[dict[str, Any], int]:
    data = request.get_json(force=True)
    slow = data.get("kind") == "notification:bench-slow"
    url = os.environ["BENCH_FLASK_SLOW_URL" if slow else "BENCH_FLASK_URL"]
    sent = 0
    for message in data.get("messages", []):
        client = apprise.Apprise()  # fresh per send, as relay does (a shared one throttles)
        client.add(url)
        if client.notify(body=message.get("message") or " ", title=message.get("title") or ""):
            sent += 1
    return {"eventId": data["metadata"]["eventId"], "sent": sent}, 200
