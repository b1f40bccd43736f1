"""The URL-valued keys of the config (`redis.url`, `platform.url`), checked when it is read, without connecting:
a typo is named with its key path at start. Messages never show a password."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import unquote, urlsplit

from pydantic import AfterValidator

SENTINEL = "redis+sentinel"
REDIS_SCHEMES = ("redis", "rediss", "unix", SENTINEL)
_SCHEMES_TEXT = "redis://, rediss://, unix:// or redis+sentinel://"
_REDIS_EXAMPLE = "redis://localhost:6379/0"
# `redis//host`, `redis:/host`, `REDIS://host`: a scheme whose `://` is mistyped.
_REDIS_MISTYPED = re.compile(r"^(rediss?|unix|redis\+sentinel):?/*(.+)$", re.IGNORECASE)
_HTTP_MISTYPED = re.compile(r"^(https?):?/*(.+)$", re.IGNORECASE)
# `localhost:6379`, `platform.example.com/x`: a host written without a scheme.
_HOST = re.compile(r"^[A-Za-z0-9_.-]+(:[0-9]+)?(/[^\s]*)?$")


def masked_url(url: str) -> str:
    """The URL with its password, if any, as **** (a user name alone is taken for a password too)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    userinfo, host = parts.netloc.rsplit("@", 1)
    user = userinfo.split(":", 1)[0]
    return parts._replace(netloc=f"{user}:****@{host}").geturl()


def _mistyped(url: str, pattern: re.Pattern[str], default: str) -> str | None:
    """What the URL was likely meant to be, or None."""
    found = pattern.match(url)
    if found:
        scheme, rest = found.group(1).lower(), found.group(2)
        return f"unix:///{rest.lstrip('/')}" if scheme == "unix" else f"{scheme}://{rest}"
    return f"{default}://{url}" if _HOST.match(url) else None


def redis_url_problem(url: str) -> str | None:
    """Why redis-py (or relay's Sentinel support) could not use this URL, or None."""
    scheme, sep, _ = url.partition("://")
    if not sep or scheme not in REDIS_SCHEMES:
        fixed = _mistyped(url, _REDIS_MISTYPED, "redis")
        said = f"the scheme {scheme!r} is not a Redis one" if sep else "no `scheme://` at its start"
        hint = f"did you mean `{masked_url(fixed)}`?" if fixed else f"write it like {_REDIS_EXAMPLE}"
        return f"not a Redis URL ({said}; it must start with {_SCHEMES_TEXT}); {hint}"
    if scheme == SENTINEL:
        try:
            sentinel_target(url)
        except ValueError as exc:
            return str(exc)
        return None
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises for a port that is not a number in 0..65535
    except ValueError as exc:
        return f"not a Redis URL ({exc}); write it like {_REDIS_EXAMPLE}"
    if parts.scheme == "unix":
        return None if parts.path else "a unix:// URL names the socket file: unix:///path/to/redis.sock"
    if not parts.hostname:
        return f"the URL names no host; write it like {_REDIS_EXAMPLE}"
    if parts.path.strip("/") and not parts.path.strip("/").isdigit():
        return f"the database (after the host) must be a number, like {_REDIS_EXAMPLE}"
    # redis-py's own parsing, as `from_url` connects later: its query arguments, its ports. Imported here,
    # so that reading a config does not load the client library.
    from redis import ConnectionPool

    try:
        ConnectionPool.from_url(url)
    except ValueError as exc:
        return f"not a Redis URL redis-py can use ({exc}); write it like {_REDIS_EXAMPLE}"
    return None


@dataclass(frozen=True)
class SentinelTarget:
    hosts: list[tuple[str, int]]
    service: str
    db: int
    password: str | None


def sentinel_target(url: str) -> SentinelTarget:
    """`redis+sentinel://[:password@]host:port[,host:port...]/service[/db]`, parsed; ValueError saying what is
    wrong (a Sentinel's port defaults to 26379)."""
    example = "redis+sentinel://host:26379,host2:26379/mymaster/0"
    parts = urlsplit(url)
    hosts = []
    for item in parts.netloc.rsplit("@", 1)[-1].split(","):
        host, colon, port = item.rpartition(":")
        if not item or (colon and (not host or not port.isdigit() or int(port) > 65535)):
            raise ValueError(f"each Sentinel is host:port (the port a number); write it like {example}")
        hosts.append((host, int(port)) if colon else (item, 26379))
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise ValueError(f"a redis+sentinel:// URL names the service after the hosts; write it like {example}")
    if len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise ValueError(f"after the service only a database number may follow; write it like {example}")
    password = unquote(parts.password) if parts.password else None
    return SentinelTarget(hosts, path[0], int(path[1]) if len(path) == 2 else 0, password)


def http_url_problem(url: str) -> str | None:
    """Why this is not an http:// or https:// URL of a host, or None."""
    example = "https://platform.example.com"
    scheme, sep, _ = url.partition("://")
    if not sep or scheme not in ("http", "https"):
        fixed = _mistyped(url, _HTTP_MISTYPED, "https")
        said = f"the scheme {scheme!r} is not http or https" if sep else "no `scheme://` at its start"
        hint = f"did you mean `{masked_url(fixed)}`?" if fixed else f"write it like {example}"
        return f"not an http(s) URL ({said}); {hint}"
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError as exc:
        return f"not an http(s) URL ({exc}); write it like {example}"
    if not parts.hostname:
        return f"the URL names no host; write it like {example}"
    return None


def _checked(problem_of: Callable[[str], str | None]) -> AfterValidator:
    def check(value: str | None) -> str | None:
        # An empty value is no value: `url: ${REDIS_URL:-}` leaves Redis to relay (embedded).
        problem = problem_of(value) if value else None
        if problem:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


RedisUrl = Annotated[str | None, _checked(redis_url_problem)]
HttpUrl = Annotated[str | None, _checked(http_url_problem)]
