"""Builds everything in one place from a Config and hands it to the entry points and jobs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from redis import Redis
from redis.sentinel import Sentinel

from relay import embedded
from relay.catalog import Catalog
from relay.config import Config, load_config
from relay.queue import Intake
from relay.rendering import Renderer
from relay.store import Store


def redis_url(config: Config) -> str:
    """The configured Redis, else the embedded one under data_dir (which `relay serve` starts)."""
    return config.redis.url or embedded.url_for(config.data_path)


def open_redis(url: str, **options: Any) -> Redis:
    """A connection for `url`: redis://, rediss://, unix://, or Sentinel as
    `redis+sentinel://[:password@]host:port[,host:port...]/service[/db]` (the current primary)."""
    if not url.startswith("redis+sentinel://"):
        return Redis.from_url(url, **options)
    parts = urlsplit(url)
    password = unquote(parts.password) if parts.password else None
    hosts = []
    for item in parts.netloc.rsplit("@", 1)[-1].split(","):
        host, _, port = item.rpartition(":")
        hosts.append((host or item, int(port) if port.isdigit() else 26379))
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise ValueError("a redis+sentinel:// URL names the service: redis+sentinel://host:26379/mymaster/0")
    db = int(path[1]) if len(path) > 1 else 0
    timeout = options.get("socket_connect_timeout", 5)
    sentinel = Sentinel(hosts, socket_timeout=timeout, password=password)  # type: ignore[no-untyped-call]
    primary: Redis = sentinel.master_for(path[0], db=db, password=password, **options)  # type: ignore[no-untyped-call]
    return primary


def connect(config: Config) -> Redis:
    return open_redis(redis_url(config), socket_timeout=10, socket_connect_timeout=5, health_check_interval=30)


@dataclass
class Runtime:
    config: Config
    redis: Redis
    store: Store
    intake: Intake
    renderer: Renderer
    catalog: Catalog | None = None


def build(config: Config, redis: Redis | None = None) -> Runtime:
    conn = redis if redis is not None else connect(config)
    store = Store(conn, config.retention)
    extra = {"platform_url": (config.platform.url or "").rstrip("/")}
    return Runtime(
        config=config,
        redis=conn,
        store=store,
        intake=Intake.create(conn, store, config.dedup_ttl, config.send_timeout),
        renderer=Renderer(config.templates_path, extra, config.templates.builtin),
        catalog=Catalog(config.platform, conn) if config.platform.url else None,
    )


_current: Runtime | None = None


def install(rt: Runtime) -> Runtime:
    """Make `rt` what jobs in this process use."""
    global _current
    _current = rt
    return rt


def runtime() -> Runtime:
    """The process's runtime; a worker started by plain `rq worker` builds it from RELAY_CONFIG."""
    global _current
    if _current is None:
        _current = build(load_config())
    return _current
