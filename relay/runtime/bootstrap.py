"""Builds everything in one place from a Config and hands it to the entry points and jobs."""

from __future__ import annotations

import dataclasses
import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.sentinel import Sentinel

from relay.config import Config, ConfigError, load_config
from relay.config.urls import SENTINEL, sentinel_target
from relay.core.clock import Clock, system_clock
from relay.core.redaction import Redactor
from relay.core.rendering import Renderer, template_globals
from relay.delivery.catalog import Catalog
from relay.delivery.context import Loaded
from relay.delivery.holding import replan_held
from relay.delivery.sender import Sender
from relay.runtime import embedded
from relay.storage.generations import CONFIG_GENERATION
from relay.storage.schema import check_schema
from relay.storage.store import Store
from relay.storage.work_queue import WorkQueue
from relay.tracing import OFF_TRACER, Tracer


def redis_url(config: Config) -> str:
    """The configured Redis, else the embedded one under data_dir (which `relay serve` starts)."""
    return config.redis.url or embedded.url_for(config.data_path)


def open_redis(url: str, **options: Any) -> Redis:
    """A connection for `url`: redis://, rediss://, unix://, or Sentinel (the current primary)."""
    return cast(Redis, _open(url, options, Redis, Sentinel))


def open_async_redis(url: str, **options: Any) -> AsyncRedis:
    return cast(AsyncRedis, _open(url, options, AsyncRedis, AsyncSentinel))


def _open(url: str, options: dict[str, Any], client_class: Any, sentinel_class: Any) -> Any:
    if not url.startswith(SENTINEL + "://"):
        return client_class.from_url(url, **options)
    t = sentinel_target(url)
    timeout = options.get("socket_connect_timeout", 5)
    sentinel = sentinel_class(t.hosts, socket_timeout=timeout, password=t.password)
    return sentinel.master_for(t.service, db=t.db, password=t.password, **options)


def connect(config: Config) -> Redis:
    timeout = socket_timeout(config)
    return open_redis(redis_url(config), socket_timeout=timeout, socket_connect_timeout=5, health_check_interval=30)


def socket_timeout(config: Config) -> float:
    """How long a command may take before the connection gives up: longer than the accept's WAIT."""
    return max(10.0, config.redis.replica_timeout + 5.0)


def process_name() -> str:
    """This process as RQ, the leases and the heartbeats name it: unique across machines and restarts."""
    return f"relay-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass
class Runtime:
    # The config and what is built from it, swapped whole by a reload (`relay.delivery.context`).
    loaded: Loaded
    redis: Redis
    store: Store
    work: WorkQueue
    sender: Sender
    # What this process scrubs from every text it shows (its config's secrets, a reload's added).
    redactor: Redactor = dataclasses.field(default_factory=Redactor)
    # Off until the process that serves turns tracing on (`relay.tracing.start`).
    tracer: Tracer = OFF_TRACER
    # The file the config came from, to read again on a reload (None: defaults and environment).
    config_file: Path | None = None

    @property
    def name(self) -> str:
        return self.store.owner

    @property
    def config(self) -> Config:
        return self.loaded.config

    @property
    def renderer(self) -> Renderer:
        return self.loaded.renderer

    @property
    def catalog(self) -> Catalog | None:
        return self.loaded.catalog

    @property
    def clock(self) -> Clock:
        return self.store.clock  # the work, the app, the workers and the commands read it through the store

    def pinned(self) -> Runtime:
        return dataclasses.replace(self)


def build(
    config: Config,
    redis: Redis | None = None,
    config_file: Path | None = None,
    clock: Clock = system_clock,
    redactor: Redactor | None = None,
) -> Runtime:
    """`redactor`: the one the process's logs were set up with (else `config`'s), which a reload adds to.
    SchemaRefused when the store holds a layout this relay does not read."""
    conn = redis if redis is not None else connect(config)
    check_schema(conn)
    store = Store(conn, config.retention, clock, owner=process_name())
    store.kinds.limit = config.metrics.max_kinds
    store.dead_worker_after = config.dead_worker_after
    return Runtime(
        loaded=load(config, conn, store),
        redis=conn,
        store=store,
        work=WorkQueue(store, config.dedup_ttl, config.redis.min_replicas, config.redis.replica_timeout),
        sender=Sender(config.worker_threads),
        redactor=redactor if redactor is not None else Redactor.of(config),
        config_file=config_file,
    )


def load(config: Config, redis: Redis, store: Store) -> Loaded:
    """`config` with its renderer and catalog (the catalog caches in `redis`, counts where `store` does)."""
    extra = template_globals(config)
    return Loaded(
        config=config,
        renderer=Renderer(config.templates_path, extra, config.templates.builtin),
        catalog=Catalog(config.platform, redis, counts=store.counts) if config.platform.url else None,
    )


FIXED_AT_START = ("server.host", "server.port", "server.path", "redis", "data_dir")


def reload_runtime(rt: Runtime, listening: bool = False) -> list[str]:
    """An invalid file raises ConfigError and the running config stays. Settings that only apply at start are kept;
    the notes returned say which changed."""
    if rt.config_file is None:
        # Reading defaults and the environment again would silently drop what the process was given.
        raise ConfigError("relay was started without a config file: there is nothing to reload")
    new = load_config(rt.config_file)
    old = rt.config
    notes = []
    kept: dict[str, Any] = {}  # each section that holds a setting fixed at start, with it as the process runs
    for name in FIXED_AT_START:
        section, _, key = name.partition(".")
        before, after = getattr(old, section), getattr(new, section)
        if key:
            kept[section] = kept.get(section, after).model_copy(update={key: getattr(before, key)})
            before, after = getattr(before, key), getattr(after, key)
        else:
            kept[section] = before
        if before != after:
            notes.append(f"{name} changed: it applies after a restart")
    new = new.model_copy(update=kept)
    # The API's address stays: a token its start would have refused there is refused here too.
    exposed = new.server.exposure_problem() if listening else None
    if exposed is not None:
        raise ConfigError(exposed)
    loaded = load(new, rt.redis, rt.store)
    rt.redactor.remember(new)  # its secrets are scrubbed before anything runs on it
    # Numbers the stores were built with: each one assignment, read where it is used.
    rt.store.kinds.limit = new.metrics.max_kinds
    rt.store.dead_worker_after = new.dead_worker_after
    rt.work.dedup_ttl = new.dedup_ttl
    rt.store.retention = rt.store.digests.retention = int(new.retention)
    rt.loaded = loaded  # one assignment: a unit of work pinned before runs on the old load whole, one after on this
    return notes


def reload_on_sighup(rt: Runtime) -> None:
    """SIGHUP reloads the config (in a thread: a signal handler must not block on Redis)."""
    import logging
    import signal
    import threading

    log = logging.getLogger("relay.reload")

    def reload() -> None:
        try:
            for note in reload_and_replan(rt):
                log.warning("%s", note)
            generation = rt.redis.incr(CONFIG_GENERATION)
            log.info("config reloaded on SIGHUP (generation %s)", generation)
        except Exception as exc:  # an invalid file or Redis down: keep running on the old config
            log.error("config reload refused, the running config is kept: %s", exc)

    signal.signal(signal.SIGHUP, lambda *_: threading.Thread(target=reload, daemon=True).start())


def reload_and_replan(rt: Runtime) -> list[str]:
    notes = reload_runtime(rt, listening=True)
    replan_held(rt)
    return notes
