"""A fast local HTTP sink for the bench: answers every POST with 200, after 100 ms on /slow; on /flaky, 503 to
one send in ten at random and to a row of FLAKY_ROW every FLAKY_EVERY sends (the rows a 10% channel meets by chance).

It records when each notification's token arrived (the token is in the message text), so the bench
can measure POST-to-arrival latency (on /flaky: to its first try, answered 200 or not; `count` counts 200s).
GET /count, GET /arrivals (JSON {token: unix time}), POST /reset.
Run: python bench/sink.py PORT
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import sys
import time

TOKEN = re.compile(rb"tok-([0-9a-f]+-[0-9]+-[0-9]+)")
SLOW_SECONDS = 0.1
FLAKY_SHARE, FLAKY_EVERY, FLAKY_ROW = 0.1, 400, 6
CHANCE = random.Random(48)


class State:
    def __init__(self) -> None:
        self.count = 0
        self.arrivals: dict[str, float] = {}
        self.inflight = 0
        self.max_inflight = 0
        self.flaky_tries = 0


STATE = State()


def _answer(body: bytes, status: str = "200 OK") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            method, path, _ = lines[0].split(b" ", 2)
            length = 0
            for line in lines[1:]:
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            body = await reader.readexactly(length) if length else b""
            if method == b"GET" and path == b"/count":
                counts = {"count": STATE.count, "max_inflight": STATE.max_inflight}
                writer.write(_answer(json.dumps(counts).encode()))
            elif method == b"GET" and path == b"/arrivals":
                writer.write(_answer(json.dumps(STATE.arrivals).encode()))
            elif method == b"POST" and path == b"/reset":
                STATE.count = 0
                STATE.arrivals = {}
                STATE.max_inflight = 0
                writer.write(_answer(b"{}"))
            else:
                arrived = time.time()
                STATE.inflight += 1
                STATE.max_inflight = max(STATE.max_inflight, STATE.inflight)
                if path.startswith(b"/slow"):
                    await asyncio.sleep(SLOW_SECONDS)
                STATE.inflight -= 1
                found = TOKEN.search(body)
                if found:
                    STATE.arrivals.setdefault(found.group(1).decode(), arrived)
                if path.startswith(b"/flaky"):
                    STATE.flaky_tries += 1
                    if STATE.flaky_tries % FLAKY_EVERY >= FLAKY_EVERY - FLAKY_ROW or CHANCE.random() < FLAKY_SHARE:
                        writer.write(_answer(b"{}", "503 Service Unavailable"))
                        await writer.drain()
                        continue
                STATE.count += 1
                writer.write(_answer(b"{}"))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
