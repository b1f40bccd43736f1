"""The notifications received, newest first, a page at a time (the admin page's list): the stream
`relay:received` (`RECEIVED`, one entry a notification accepted, written by the accept script), merged by time
with the zset `relay:events` where an earlier relay indexed them (read until its entries age out).

A page starts below a cursor: the stream ID of the last one shown (`<ms>-<seq>`, so that the notifications of
one millisecond are never cut at a page's end), or a time in seconds (a float: the last one shown was an earlier
relay's entry, or an earlier relay's link)."""

from __future__ import annotations

import math
import re
from typing import Any, cast

from redis import Redis

from relay.storage.records import EVENTS, RECEIVED, _text

MAX_PART = 2**64 - 1  # a stream ID's ms and sequence are 64-bit
_STREAM_ID = re.compile(r"(\d{1,20})-(\d{1,20})")
_SECONDS = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d{1,3})?")

StreamId = tuple[int, int]
Before = StreamId | float


def parse_before(text: str) -> Before:
    """A page's cursor from a query: `<ms>-<seq>` or a finite number of seconds; raises ValueError for any
    other text."""
    if match := _STREAM_ID.fullmatch(text):
        ms, seq = int(match[1]), int(match[2])
        if ms > MAX_PART or seq > MAX_PART:
            raise ValueError("a stream ID's parts are 64-bit")
        return ms, seq
    if not _SECONDS.fullmatch(text) or not math.isfinite(seconds := float(text)):
        raise ValueError("before: a stream ID (<ms>-<seq>) or a finite time in seconds")
    return seconds


def before_text(cursor: Before) -> str:
    return f"{cursor[0]}-{cursor[1]}" if isinstance(cursor, tuple) else repr(cursor)


def _below_seconds(seconds: float) -> str | None:
    """The stream's exclusive bound for the entries received before `seconds` (ms / 1000 < seconds, as the
    merge compares them); None: none is."""
    if seconds <= 0:
        return None
    if seconds >= MAX_PART / 1000:
        return "+"
    ms = math.ceil(seconds * 1000)  # the first ms at or past it, once the product's rounding is undone
    while ms / 1000 >= seconds:
        ms -= 1
    while ms / 1000 < seconds:
        ms += 1
    return f"({ms}-0"


def _bounds(before: Before | None) -> tuple[str | None, str]:
    """The stream's and the zset's upper bounds of a page below `before`. An earlier relay's entry of the same
    time as a stream entry comes after it."""
    if before is None:
        return "+", "+inf"
    if isinstance(before, tuple):
        ms, seq = before
        return (f"({ms}-{seq}" if ms or seq else None), repr(ms / 1000)
    return _below_seconds(before), f"({before!r}"


def received_page(redis: Redis, before: Before | None, limit: int) -> tuple[list[str], str | None]:
    """The eventIds of up to `limit` notifications received below `before`, newest first (one listed twice, an
    id accepted again after the dedup window, is shown once a page), and the next page's cursor (None: no
    more). One round trip: the stream and the zset read side by side, `limit` + 1 of each."""
    stream_high, zset_high = _bounds(before)
    pipe = redis.pipeline(transaction=False)
    if stream_high is not None:
        pipe.xrevrange(RECEIVED, stream_high, "-", count=limit + 1)
    pipe.zrevrangebyscore(EVENTS, zset_high, "-inf", start=0, num=limit + 1, withscores=True)
    answers = pipe.execute()
    # Sorted by (time, stream before zset, sequence): each source's own order kept, the two merged by time.
    rows: list[tuple[float, int, int, str, Before]] = []
    for entry_id, fields in cast(list[tuple[Any, dict[Any, Any]]], answers[0] if stream_high is not None else []):
        ms, seq = (int(part) for part in _text(entry_id).split("-"))
        rows.append((ms / 1000, 1, seq, _text(fields.get(b"eventId", b"")), (ms, seq)))
    for member, score in cast(list[tuple[Any, float]], answers[-1]):
        rows.append((float(score), 0, 0, _text(member), float(score)))
    rows.sort(key=lambda row: row[:3], reverse=True)
    shown = rows[:limit]
    ids = list(dict.fromkeys(row[3] for row in shown if row[3]))
    return ids, before_text(shown[-1][4]) if len(rows) > limit else None
