"""Nobody guesses their way in: refused credentials are counted per surface (the `endpoint` label of
`relay_auth_failures_total`) and client, in a sliding window in Redis every replica shares, and a client that
sent too many is answered 429 there until the window lets go. `check` comes before a credential is looked at
(a right guess while throttled is 429 too, confirming nothing), `failed` after a refusal (its reason logged,
never the credential; one line per client and window, not per guess). Redis down, nothing is throttled (the
check still holds). The client is the TCP peer or, behind `server.trusted_proxies`, the right-most
X-Forwarded-For address that is not one; IPv6 clients count by their /64."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import os
import time
from collections.abc import Callable

from redis.asyncio import Redis as AsyncRedis
from redis.exceptions import RedisError
from starlette.requests import Request
from starlette.responses import Response

from relay.config import ServerConfig
from relay.config.server import Network
from relay.storage.records import metric_field
from relay.storage.tally import Counts
from relay.web.errors import error_response

log = logging.getLogger("relay.web.throttle")

WEBHOOK = "webhook"
API = "api"
UI = "ui"
PREFERENCES = "preferences"
UNSUBSCRIBE = "unsubscribe"

FAILURES = "relay_auth_failures_total"
THROTTLED = "relay_auth_throttled_total"
KEY_PREFIX = "relay:auth-failures:"
REDIS_DOWN_LOGGED_EVERY = 60.0  # seconds

# A client's refusals: a sorted set of their times (`KEY_PREFIX` + surface:client), each a unique member.


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address as X-Forwarded-For may carry it: bare, `[v6]:port` or `v4:port`."""
    text = text.strip()
    if text.startswith("["):
        text = text[1 : text.find("]")] if "]" in text else text
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def from_trusted_proxy(request: Request, trusted: tuple[Network, ...]) -> bool:
    """Whether the request's TCP peer is one of `server.trusted_proxies`."""
    peer = _ip(request.client.host if request.client else "")
    return peer is not None and any(peer in net for net in trusted)


def client_address(request: Request, trusted: tuple[Network, ...]) -> str:
    """The address of the client behind `request` (see the module's docstring)."""
    address = request.client.host if request.client else ""
    if not from_trusted_proxy(request, trusted):
        return address
    hops = [hop for value in request.headers.getlist("x-forwarded-for") for hop in value.split(",")]
    for hop in reversed(hops):
        ip = _ip(hop)
        if ip is None:  # a trusted proxy passed on garbage: the last address known is the client
            break
        address = str(ip)
        if not any(ip in net for net in trusted):
            break
    return address


def counted_as(address: str) -> str:
    """The identity refusals are counted under: an IPv4 address, an IPv6 /64, or the peer's name as given."""
    ip = _ip(address)
    if ip is None:
        return address or "unknown"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class Guard:
    """One per app; `server` is read at each call (a reload changes the limits and the proxies)."""

    def __init__(
        self,
        connect: Callable[[], AsyncRedis],
        server: Callable[[], ServerConfig],
        clock: Callable[[], float],
        counts: Counts | None = None,
    ) -> None:
        self.connect, self.server, self.clock = connect, server, clock
        self.counts = counts if counts is not None else Counts()  # where this process counts (relay.storage.tally)
        # One client per running loop: an asyncio connection belongs to its loop.
        self.clients: dict[asyncio.AbstractEventLoop, AsyncRedis] = {}
        self.quiet_until = 0.0  # Redis down: said once a minute, not at every call a client can make

    def _redis_down(self, message: str, *args: object) -> None:
        now = time.monotonic()
        if now >= self.quiet_until:
            self.quiet_until = now + REDIS_DOWN_LOGGED_EVERY
            log.warning(message, *args)

    def _redis(self) -> AsyncRedis:
        loop = asyncio.get_running_loop()
        if loop not in self.clients:
            self.clients[loop] = self.connect()
        return self.clients[loop]

    def _client(self, request: Request, server: ServerConfig) -> str:
        return counted_as(client_address(request, server.trusted_networks()))

    async def check(
        self, request: Request, surface: str, page: Callable[[int], Response] | None = None
    ) -> Response | None:
        """The 429 answer for a client over the limit on `surface`, else None; a browser gets `page(seconds)`."""
        server = self.server()
        limits = server.auth_failures
        client = self._client(request, server)
        now, redis = self.clock(), self._redis()
        try:  # the `limit`-th newest refusal within the window: the client waits until it leaves the window
            since = f"({now - limits.window!r}"
            frees = await redis.zrevrangebyscore(
                KEY_PREFIX + f"{surface}:{client}", "+inf", since, start=limits.limit - 1, num=1, withscores=True
            )
            if not frees:
                return None
            await redis.hincrby(self.counts.key, metric_field(THROTTLED), 1)
        except RedisError as exc:
            self._redis_down("%s: refused credentials not looked up, nothing throttled: Redis %s", surface, exc)
            return None
        if (left := float(frees[0][1]) + limits.window - now) <= 0:
            return None
        seconds = max(1, math.ceil(left))
        if page is not None and "text/html" in request.headers.get("accept", ""):
            response = page(seconds)
            response.status_code = 429
            response.headers["Retry-After"] = str(seconds)
            return response
        return error_response(
            429,
            [f"too many refused credentials from this address; try again in {seconds} s"],
            "Too many failed attempts: wait before trying again.",
            solutions=[f"Wait {seconds} seconds (Retry-After), then try again with the right credentials."],
            headers={"Retry-After": str(seconds)},
        )

    async def failed(self, request: Request, surface: str, reason: str = "invalid credentials") -> None:
        """Count a refused credential of this request's client on `surface`; `reason` goes in the log."""
        server = self.server()
        limits = server.auth_failures
        client = self._client(request, server)
        now, key, counter = self.clock(), KEY_PREFIX + f"{surface}:{client}", metric_field(FAILURES, endpoint=surface)
        pipe = self._redis().pipeline(transaction=True)
        pipe.zremrangebyscore(key, "-inf", repr(now - limits.window))
        pipe.zadd(key, {os.urandom(8).hex(): now})
        pipe.pexpire(key, math.ceil(limits.window * 1000))
        pipe.hincrby(self.counts.key, counter, 1)
        pipe.zcard(key)  # the client's refusals within the window, this one included
        try:
            count = int((await pipe.execute())[-1])
        except RedisError as exc:
            self._redis_down(
                "%s: refused credentials from %s (%s), not counted: Redis %s", surface, client, reason, exc
            )
            return
        window = f"{limits.window:g} s"
        if count == 1:
            log.warning(
                "%s: refused credentials from %s (%s); more from it within %s are counted, not logged",
                surface,
                client,
                reason,
                window,
            )
        if count == limits.limit:
            log.warning(
                "%s: %s refused %d times within %s: answered 429 until they leave the window",
                surface,
                client,
                count,
                window,
            )
