"""An SMTP sink for the bench (aiosmtpd, as the tests' SmtpSink): accepts every mail with 250 OK and records when
each notification's token arrived (the token is in the message text), with an HTTP side like sink.py's
(GET /count, GET /arrivals, POST /reset), so that run.Sink's readers work on it. /count also says how many
mails were replies (had In-Reply-To).
Run: python bench/smtp_sink.py SMTP_PORT HTTP_PORT
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import json
import sys
import time
from typing import Any

import sink  # bench/sink.py, beside this file: its state, token pattern and answer
from aiosmtpd.smtp import SMTP

REPLIES = {"count": 0}


def _text(content: bytes) -> bytes:
    """The mail's subject and decoded text parts (a token may be wrapped by quoted-printable)."""
    msg = email.message_from_bytes(content, policy=email.policy.default)
    if msg["In-Reply-To"]:
        REPLIES["count"] += 1
    texts = [str(msg["Subject"] or "")]
    texts += [str(p.get_content()) for p in msg.walk() if p.get_content_maintype() == "text"]
    return "\n".join(texts).encode()


class Handler:
    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        arrived = time.time()
        sink.STATE.count += 1
        found = sink.TOKEN.search(_text(envelope.content))
        if found:
            sink.STATE.arrivals.setdefault(found.group(1).decode(), arrived)
        return "250 OK"


async def control(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """The HTTP side, one request per connection (run.http's urllib): /count with the replies, /arrivals, /reset."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()
        return
    if head.startswith(b"POST /reset "):
        sink.STATE.count, sink.STATE.arrivals, REPLIES["count"] = 0, {}, 0
        body = b"{}"
    elif head.startswith(b"GET /arrivals "):
        body = json.dumps(sink.STATE.arrivals).encode()
    else:
        body = json.dumps({"count": sink.STATE.count, "replies": REPLIES["count"]}).encode()
    writer.write(sink._answer(body))
    await writer.drain()
    writer.close()


async def main(smtp_port: int, http_port: int) -> None:
    loop = asyncio.get_running_loop()
    smtp = await loop.create_server(lambda: SMTP(Handler()), "127.0.0.1", smtp_port, backlog=1024)
    http = await asyncio.start_server(control, "127.0.0.1", http_port, backlog=1024)
    async with smtp, http:
        await asyncio.gather(smtp.serve_forever(), http.serve_forever())


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
