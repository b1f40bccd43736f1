"""The API's listening socket and its uvicorn server, shared by `relay serve` and `relay api`. relay binds the port
itself, before anything else starts, so a port in use is one clear line and nothing started for nothing; uvicorn
serves on the bound sockets (`Server.run(sockets=...)`), and "listening" is logged once it does."""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Callable
from types import FrameType

import uvicorn
from starlette.types import ASGIApp

from relay.config.server import ServerConfig
from relay.config.source import ConfigError

log = logging.getLogger("relay.serve")
BACKLOG = 2048  # uvicorn's default


class PortUnavailable(ConfigError):
    """The configured address cannot be listened on: in use, not allowed, or not this machine's."""


def _problem(host: str, port: int, exc: OSError, flag: str) -> str:
    where = f"{host}:{port}"
    choose = f"server.port in the config, RELAY_SERVER__PORT in the environment{flag}"
    if exc.errno == errno.EADDRINUSE:
        return f"cannot listen on {where}: port {port} is already in use (another relay?); choose another with {choose}"
    if exc.errno == errno.EACCES:
        return f"cannot listen on {where}: not allowed (ports below 1024 need privileges); choose another with {choose}"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {where}: {host} is not an address of this machine; check server.host"
    return f"cannot listen on {where}: {exc.strerror or exc}"


def bind(server: ServerConfig, flag: str = "") -> list[socket.socket]:
    """Every address the host name has, as uvicorn would; `flag`: the command's option in the error (" or --port")."""
    host, port = server.host, server.port
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise PortUnavailable(f"cannot listen on {host}:{port}: {exc}; check server.host") from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            # As asyncio and uvicorn do: a port left in TIME_WAIT by a previous run may be taken again;
            # a port another process listens on may not.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise PortUnavailable(_problem(host, port, exc, flag)) from None
    return sockets


def base_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def local_url(host: str, port: int) -> str:
    """The base URL a client on this machine reaches a server bound to host:port by."""
    return base_url("127.0.0.1" if host in {"", "0.0.0.0", "::"} else host, port)


class _Server(uvicorn.Server):
    def __init__(
        self, config: uvicorn.Config, started: Callable[[], None], on_exit: Callable[[], None] | None = None
    ) -> None:
        super().__init__(config)
        self._started = started
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """uvicorn's handler of the stop signals: `on_exit` hears of the stop as it begins."""
        if self._on_exit is not None:
            self._on_exit()
        super().handle_exit(sig, frame)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._started()


def serve_http(
    app: ASGIApp,
    server: ServerConfig,
    sockets: list[socket.socket],
    also: str = "",
    on_exit: Callable[[], None] | None = None,
) -> None:
    """Until a stop signal (then `on_exit`); `also` ends the "listening" line, e.g. " with 2 worker(s)"."""
    port = int(sockets[0].getsockname()[1])  # the port the system chose, for server.port 0

    def started() -> None:
        log.info("relay listening on %s%s%s", base_url(server.host, port), server.path, also)
        log.info("admin page: %s/ui", local_url(server.host, port))

    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=10,
        # h11 takes a configurable bound on the request line plus headers (httptools has a fixed
        # one of its own); over it, uvicorn answers a plain-text 400 and closes the connection.
        http="h11",
        h11_max_incomplete_event_size=server.limits.max_header_bytes,
        # uvicorn would take X-Forwarded-For from 127.0.0.1 by default; relay reads it itself, and only
        # from server.trusted_proxies (relay/web/throttle.py), so that no client names itself another.
        proxy_headers=False,
    )
    _Server(config, started, on_exit).run(sockets=sockets)
