"""One command sent on an asyncio Redis connection of the intake, with none of redis-py's per-call work.

The webhook's one round trip (the accept script) is most of what a request costs; redis-py's generic path
(argument encoding, pool checks, retry and telemetry hooks) costs as much again. This sends a command
already packed in Redis' wire format on a few connections kept for it, through redis-py's public
`Connection.send_packed_command` and `read_response`.
"""

from __future__ import annotations

import asyncio
from typing import Any
from weakref import WeakKeyDictionary

from redis.asyncio import ConnectionPool as AsyncConnectionPool
from redis.asyncio import Redis as AsyncRedis
from redis.exceptions import ResponseError


def resp_command(*args: str | bytes | int) -> bytes:
    """One command in Redis' wire format (RESP), as `send_packed_command` takes it."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        raw = arg if isinstance(arg, bytes) else str(arg).encode()
        parts += (b"$%d\r\n" % len(raw), raw, b"\r\n")
    return b"".join(parts)


class _Lanes:
    """A few connections of a client kept for the intake's one command, handed out without the pool's
    per-use checks (its lock, and a read to make sure no stale answer waits): a connection is only ever
    given back in step, because one whose answer was not read whole is closed."""

    def __init__(self, client: AsyncRedis, size: int) -> None:
        self.free: asyncio.Queue[Any] = asyncio.Queue()
        for _ in range(size):
            self.free.put_nowait(client.connection_pool.make_connection())  # type: ignore[no-untyped-call]

    async def call(self, command: bytes) -> Any:
        conn = await self.free.get()
        try:
            return await _exchange(conn, command)
        finally:
            self.free.put_nowait(conn)


_lanes: WeakKeyDictionary[AsyncRedis, _Lanes] = WeakKeyDictionary()
LANES = 8  # connections per client: more than the round trips in flight at a time on one event loop


async def call(client: AsyncRedis, command: bytes) -> Any:
    """Send one packed command on one of the client's intake connections and read its answer.

    A Sentinel client's connections find the primary as they connect, through their pool: those are
    used as the pool hands them out."""
    pool = client.connection_pool
    if type(pool) is not AsyncConnectionPool:
        return await _call_pooled(pool, command)
    lanes = _lanes.get(client)
    if lanes is None:
        lanes = _lanes[client] = _Lanes(client, LANES)
    return await lanes.call(command)


async def _call_pooled(pool: Any, command: bytes) -> Any:
    conn = await pool.get_connection()
    try:
        return await _exchange(conn, command)
    finally:
        await pool.release(conn)


async def _exchange(conn: Any, command: bytes) -> Any:
    try:
        await conn.send_packed_command(command)  # connects first when it is not connected
        return await conn.read_response()
    except ResponseError:
        raise  # the server answered: the connection is in step
    except BaseException:
        await conn.disconnect()  # a half-read answer must not reach the next caller
        raise
