"""The bare baseline of P1: a Starlette handler that reads the body and answers 202, nothing else.

Served with the same uvicorn settings as `relay api`. Run: python bench/bare_app.py PORT
"""

from __future__ import annotations

import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


async def webhook(request: Request) -> Response:
    await request.body()
    return JSONResponse({"status": "accepted"}, 202)


app = Starlette(routes=[Route("/webhook", webhook, methods=["POST"])])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_config=None, access_log=False, lifespan="off")
