"""The notifications received, newest first, a page at a time (the admin page's list): the stream `relay:received`
(`RECEIVED`, written by the accept script). A page starts below a cursor, the stream ID of the last one shown
(`<ms>-<seq>`, so that the notifications of one millisecond are never cut at a page's end)."""

from __future__ import annotations

import re
from typing import Any, cast

from redis import Redis

from relay.storage.records import RECEIVED, _text

MAX_PART = 2**64 - 1  # a stream ID's ms and sequence are 64-bit
_STREAM_ID = re.compile(r"(\d{1,20})-(\d{1,20})")

Before = tuple[int, int]  # a stream ID: (ms, sequence)


def parse_before(text: str) -> Before:
    """A page's cursor from a query: `<ms>-<seq>`; raises ValueError for any other text."""
    if not (match := _STREAM_ID.fullmatch(text)):
        raise ValueError("before: a stream ID (<ms>-<seq>)")
    ms, seq = int(match[1]), int(match[2])
    if ms > MAX_PART or seq > MAX_PART:
        raise ValueError("a stream ID's parts are 64-bit")
    return ms, seq


def received_page(redis: Redis, before: Before | None, limit: int) -> tuple[list[str], str | None]:
    """The eventIds of up to `limit` notifications received below `before`, newest first (one listed twice, an
    id accepted again after the dedup window, is shown once a page), and the next page's cursor (None: no
    more). One round trip, `limit` + 1 entries."""
    if before == (0, 0):
        return [], None  # nothing is below the first ID
    high = "+" if before is None else f"({before[0]}-{before[1]}"
    entries = cast(list[tuple[Any, dict[Any, Any]]], redis.xrevrange(RECEIVED, high, "-", count=limit + 1))
    shown = entries[:limit]
    ids = list(dict.fromkeys(_text(fields.get(b"eventId", b"")) for _, fields in shown))
    last = _text(shown[-1][0]) if shown else ""
    return [i for i in ids if i], last if len(entries) > limit else None
