"""Builds everything in one place from a Config and hands it to the entry points and jobs."""

from __future__ import annotations

from dataclasses import dataclass

from redis import Redis

from relay import embedded
from relay.catalog import Catalog
from relay.config import Config, load_config
from relay.queue import Intake
from relay.rendering import Renderer
from relay.store import Store


def redis_url(config: Config) -> str:
    """The configured Redis, else the embedded one under data_dir (which `relay serve` starts)."""
    return config.redis.url or embedded.url_for(config.data_path)


def connect(config: Config) -> Redis:
    return Redis.from_url(redis_url(config), socket_timeout=10, socket_connect_timeout=5, health_check_interval=30)


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
